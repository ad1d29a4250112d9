"""Excerpts placed by scored anchors: meaning (the better-scored hit) first, the query's words within it."""

from __future__ import annotations

from mcp_analysis.search.excerpt import excerpt

FILLER = "This paragraph talks about something else entirely and goes on for a while. "


def _text() -> tuple[str, tuple[int, int], tuple[int, int]]:
    strong = "The grant survives a merger of the companies. " + FILLER * 6
    weak = FILLER * 4 + "Licence fee and licence copies: a fee per licence copy. " + FILLER * 2
    text = strong + "\n\n" + weak
    return text, (0, len(strong)), (len(strong) + 2, len(text))


def test_window_goes_to_the_better_scored_anchor_even_where_the_query_words_are_elsewhere() -> None:
    text, strong, weak = _text()
    shown = excerpt(text, "licence fee copies", 300, strong, anchors=[(*strong, 0.62), (*weak, 0.41)])
    assert "merger" in shown and "per licence copy" not in shown


def test_words_decide_between_anchors_that_score_alike() -> None:
    text, strong, weak = _text()
    shown = excerpt(text, "licence fee copies", 300, strong, anchors=[(*strong, 0.50), (*weak, 0.50)])
    assert "per licence copy" in shown


def test_without_scored_anchors_the_words_decide_as_before() -> None:
    text, strong, _ = _text()
    assert "per licence copy" in excerpt(text, "licence fee copies", 300, strong)
