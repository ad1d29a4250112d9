"""Fused re-ranking and near-duplicate ordering, on hand-made candidates (pure functions)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from mcp_analysis.search.clauses import clause_scores, within_documents
from mcp_analysis.search.hybrid import Evidence, Hit
from mcp_analysis.search.rerank import (
    CACHED_TITLE_CHARS,
    Names,
    Weights,
    distinct,
    distinctive,
    keyword_scale,
    place_nearest,
    rerank,
    title_match,
    title_names,
    token_counts,
    tokens,
    version_conflicts,
)
from mcp_analysis.store.models import ChunkRecord

TITLES = {"gpl2": "license-GPL-2", "gpl3": "license-GPL-3", "mpl2": "Mozilla Public License Version 2.0"}


def hit(doc: str, cosine: float, keyword: float | None, content: str = "") -> Hit:
    chunk = ChunkRecord(id=f"{doc}-{cosine}-{keyword}", document_id=doc, content=content or f"text of {doc}", order=0)
    return Hit(chunk, 0.0, Evidence(cosine, keyword))


@given(st.text(alphabet="abglpvGPLV0123456789.,\u00e9\u0130\u0660\u00b2 -\t\n", max_size=60))
def test_token_counts_count_what_tokens_names(text: str) -> None:
    """The counting the distinctive-terms signal uses is the tokens' own: versions ("gplv3" -> gpl, 3),
    trailing ".0"s ("2.0.0" -> 2), numbers with dots, words."""
    counted, counts = token_counts(text)
    assert counted == len(tokens(text)) and counts == Counter(tokens(text))


def test_versions_and_abbreviations_are_names() -> None:
    assert {"gpl", "3"} <= Names.of("GPLv3: may I").words
    assert {"mpl", "2"} <= Names.of("MPL-2.0").words  # "2.0" is version 2
    # The query abbreviates the title, or spells out the title's abbreviation.
    assert Names.of("Mozilla Public License 2.0").acronyms["mpl"] == {"mozilla", "public", "license"}
    flat = lambda _: 1.0  # noqa: E731
    spelled = title_match(Names.of("MPL 2.0 courts"), Names.of(TITLES["mpl2"]), flat)
    other_version = title_match(Names.of("MPL 2.0 courts"), Names.of("license-MPL-1.1"), flat)
    assert spelled > other_version > 0
    assert title_match(Names.of("Mozilla Public License 2.0"), Names.of("license-MPL-2.0"), flat) == 1.0
    assert title_match(Names.of("how do closures work"), Names.of("license-GPL-2"), flat) == 0.0


def test_the_document_a_query_names_wins_a_close_call() -> None:
    # Two versions of one clause, nearly as close in meaning and words: the named version comes first.
    hits = [hit("gpl3", 0.62, 10.0), hit("gpl2", 0.60, 9.5)]
    ranked = rerank(hits, "GPLv2: can I charge for copies?", TITLES.__getitem__)
    assert [h.chunk.document_id for h in ranked] == ["gpl2", "gpl3"]
    assert ranked[0].score > ranked[1].score
    # Without a name in the query, meaning and words decide.
    plain = rerank(hits, "can I charge for copies?", TITLES.__getitem__)
    assert [h.chunk.document_id for h in plain] == ["gpl3", "gpl2"]


def test_a_much_closer_meaning_beats_a_title_match_and_keyword_scores_are_relative() -> None:
    hits = [hit("gpl2", 0.30, 2.0), hit("gpl3", 0.75, None), hit("notice", 0.40, 20.0)]
    titles = {**TITLES, "notice": "Mozilla notice"}.__getitem__
    only_three = Weights(vector=0.5, keyword=0.2, title=0.2, distinct=0.0, version=0.0)
    ranked = rerank(hits, "GPL 2 fee for copies", titles, only_three)
    assert [h.chunk.document_id for h in ranked] == ["gpl3", "notice", "gpl2"]
    # 0.5 * 0.40 + 0.2 * (20/20 / 2 + 20/(20 + 3 x 20) / 2): the best keyword score counts as 1 in the
    # relative half; the saturating half knees at 3x the median of the found scores (2 and 20: 20).
    assert abs(ranked[1].score - (0.20 + 0.2 * (0.5 + 0.5 * 20 / 80))) < 1e-9


def test_one_keyword_outlier_neither_takes_the_whole_weight_nor_flattens_the_others() -> None:
    scores = [100.0, 10.0, 9.0, 8.0, 0.0]
    scaled = [keyword_scale(scores)(s) for s in scores]
    relative = [s / 100.0 for s in scores]
    assert scaled[0] < relative[0] == 1.0  # the outlier keeps less than the whole weight
    assert scaled[1] - scaled[3] > relative[1] - relative[3]  # the others stay apart
    assert scaled == sorted(scaled, reverse=True) and scaled[-1] == 0.0  # the order is kept; missed is 0


def test_a_clause_repeated_by_another_document_moves_after_distinct_hits() -> None:
    clause = "you must give the recipients all the rights that you have and show them these terms " * 2
    first, repeat = hit("gpl2", 0.7, 5.0, clause), hit("gpl3", 0.69, 5.0, "Preamble. " + clause)
    same_document = hit("gpl2", 0.65, 4.0, clause + " more")
    other = hit("mpl2", 0.5, 1.0, "Mozilla Foundation is the license steward of this text")
    ordered = distinct([first, repeat, same_document, other], wanted=5)
    assert ordered == [first, same_document, other, repeat]
    # Checks stop once enough hits are distinct: the rest keeps its order.
    assert distinct([first, other, repeat], wanted=2) == [first, other, repeat]


def test_distinctive_terms_tell_near_duplicates_apart() -> None:
    clause = "you may copy and distribute the library under the terms of this license "
    texts = [clause * 3, clause * 3 + "linking a program with the library is allowed", clause * 2 + "notice"]
    scores = distinctive(texts, "may I link my program with this library: linking rules?")
    assert scores[1] == 1.0 and scores[0] < 0.5  # the words all three share count for little
    assert distinctive(texts, "zebra") == distinctive(texts, "") == [0.0, 0.0, 0.0]
    # As a signal of the fused score, it breaks a tie of two near-duplicates.
    hits = [hit("gpl3", 0.6, 10.0, texts[0]), hit("lgpl", 0.6, 10.0, texts[1])]
    titles = {"gpl3": "licence", "lgpl": "licence"}.__getitem__
    ranked = rerank(hits, "linking rules", titles, Weights(distinct=0.1))
    assert [h.chunk.document_id for h in ranked] == ["lgpl", "gpl3"]


def test_a_title_with_another_version_than_the_one_named_loses_part_of_its_match() -> None:
    titles = {d: Names.of(t) for d, t in {**TITLES, "lgpl": "license-LGPL-2.1", "faq": "GPL FAQ"}.items()}
    # A title is of the named line when it names the name too: MPL 2.0 carries a 2, but not GPL's.
    assert version_conflicts("GPLv2: can I charge for copies?", titles) == {"gpl3", "lgpl", "mpl2"}
    assert version_conflicts("MPL 2.0 courts", titles) == {"gpl2", "gpl3", "lgpl"}  # 2.0 is version 2
    assert version_conflicts("LGPL 2.1 linking", titles) == {"gpl2", "gpl3", "mpl2"}
    assert version_conflicts("what changed in version 3?", titles) == {"gpl2", "mpl2", "lgpl"}
    # A number no candidate's title carries names no version; a title without numbers never conflicts.
    assert version_conflicts("GPL 25", titles) == set()
    assert version_conflicts("can I charge for copies?", titles) == set()
    # Meaning and words tie: the conflicting title loses a share of its title signal, no more.
    hits = [hit("gpl3", 0.6, 10.0), hit("gpl2", 0.6, 10.0)]
    score = {h.chunk.document_id: h.score for h in rerank(hits, "GPLv2 fees", TITLES.__getitem__)}
    without = {h.chunk.document_id: h.score for h in rerank(hits, "GPLv2 fees", TITLES.__getitem__, Weights(version=0))}
    assert score["gpl2"] == without["gpl2"] and score["gpl3"] < without["gpl3"]
    assert without["gpl3"] - score["gpl3"] < Weights().title * Weights().version


def _conflicts(query: str, *titles: str) -> set[str]:
    return version_conflicts(query, {t: Names.of(t) for t in titles})


def test_only_a_number_after_a_name_of_a_title_is_a_version_and_a_release_line_takes_in_its_releases() -> None:
    # "3" names the line 3.x: 3.12 is of it, 2.7 is not; "12" is not "12.4"'s line's rival.
    assert _conflicts("Python 3 asyncio tutorial", "Python 2.7 docs", "Python 3.12 documentation") == {
        "Python 2.7 docs"
    }
    assert _conflicts("Debian 12 install guide", "Debian 11 guide", "Debian 12.4 release notes") == {"Debian 11 guide"}
    # Counts, years and numbers inside product names are no versions of anything the titles name.
    assert _conflicts("how do I allocate 2 GPUs per worker", "Kubernetes 1.29 GPU scheduling", "Ray 2.9 guide") == set()
    assert _conflicts("list S3 buckets with boto3", "AWS SDK v2 guide", "EC2 user guide") == set()
    assert _conflicts("top 10 tips for writing reports", "Annual report 2023", "Report 10 of 12") == set()
    assert _conflicts("report 2023", "Annual report 2023", "Report 2022") == set()  # a year is no version


def test_a_conflicting_title_never_ranks_below_a_title_that_matches_nothing() -> None:
    hits = [hit("gpl3", 0.6, 10.0), hit("style", 0.6, 10.0)]
    titles = {"gpl3": "GPL 3 manual of free software tools", "style": "Style guide", "gpl2": "GPL 2"}.__getitem__
    ranked = rerank([*hits, hit("gpl2", 0.6, 10.0)], "GPL 2 fees", titles)
    order = [h.chunk.document_id for h in ranked]
    assert order.index("gpl3") < order.index("style") and order[0] == "gpl2"


def test_the_clause_holding_the_questions_rare_words_takes_its_documents_first_place() -> None:
    preamble = "the licenses for most software are designed to take away your freedom to share and change it"
    clause = "if the interface presents a list of user commands or options, such as a menu, a prominent item"
    ranked = [
        hit("gpl3", 0.7, 9.0, f"GPL 3 {preamble}"),
        hit("mpl2", 0.65, 8.0, "the license steward may publish new versions of this license, that is enough"),
        hit("gpl3", 0.6, 7.0, f"{clause} in the list meets this criterion: it displays the notices"),
        hit("gpl3", 0.5, 6.0, f"GPL 3 appropriate legal notices {preamble}"),
    ]
    for place, h in enumerate(ranked):
        h.score = 1.0 - place / 20
    titles = {"gpl3": "GPL 3 legal", "mpl2": "Mozilla Public License"}.__getitem__
    question = "GPL 3: is a menu enough for the legal notices?"
    before = [(h.chunk.document_id, h.score) for h in ranked]
    given = [(h.chunk.id, h.score) for h in ranked]
    reordered = within_documents(ranked, question, titles, 0.5)
    assert [(h.chunk.id, h.score) for h in ranked] == given  # the caller's hits are left as they were
    # Documents keep their places and each place its score; the menu clause takes gpl3's first place.
    assert [(h.chunk.document_id, h.score) for h in reordered] == before
    assert [h.chunk.id for h in reordered] == [ranked[i].chunk.id for i in (2, 1, 0, 3)]
    assert within_documents(ranked, question, titles, 0.0) == ranked


def test_a_word_every_chunk_of_a_document_holds_counts_for_nothing_and_a_rare_one_for_much() -> None:
    bags = [{"licens", "menu"}, {"licens", "program"}, {"licens"}]
    scores = clause_scores(bags, ["licens", "menu"], [1.0, 1.0])
    assert scores[0] > 0.5 > scores[1] == scores[2]


def test_a_titles_names_are_cached_and_a_huge_title_is_not_kept() -> None:
    short = "license-GPL-3 for the cache test"
    assert title_names(short) is title_names(short)  # the same documents' titles come back query after query
    huge = "GPL " * CACHED_TITLE_CHARS
    assert title_names(huge) is not title_names(huge) and title_names(huge).words == Names.of(huge).words


def test_the_nearest_chunk_moves_up_to_its_place_unless_it_stands_there() -> None:
    ranked = [hit("intro", 0.5, 9.0), hit("basics", 0.52, 8.0), hit("arrays", 0.51, 7.0), hit("structs", 0.58, 1.0)]
    for h, score in zip(ranked, (0.6, 0.5, 0.45, 0.4), strict=True):
        h.score = score
    moved = place_nearest(list(ranked), 3)
    assert [h.chunk.document_id for h in moved] == ["intro", "basics", "structs", "arrays"]
    assert [h.score for h in moved] == [0.6, 0.5, 0.45, 0.45]  # it takes the score of the place it takes
    assert place_nearest(list(ranked), 0) == ranked  # off
    assert place_nearest(list(ranked), 4) == ranked  # already there
    # Another chunk of its document holds a place before: it still takes its place, for it may be the
    # clause that answers; with by_chunk off (the rule before), nothing moves.
    same = [hit("structs", 0.3, 5.0), *ranked]
    for h, score in zip(same, (0.7, 0.6, 0.5, 0.45, 0.4), strict=True):
        h.score = score
    moved = place_nearest(list(same), 3)
    assert [h.chunk.document_id for h in moved] == ["structs", "intro", "structs", "basics", "arrays"]
    assert moved[2] is ranked[3] and moved[2].evidence.cosine == 0.58
    assert place_nearest(list(same), 3, by_chunk=False) == same
    assert place_nearest(list(moved), 3) == moved  # standing there itself: nothing moves
