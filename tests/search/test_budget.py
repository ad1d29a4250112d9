"""How a search result's passage budget is split among its hits (search/budget.py)."""

from __future__ import annotations

from mcp_analysis.search.budget import NEARLY_WHOLE, RANK_SHARES, passage_widths, rank_share


def test_without_shares_every_hit_shows_context_characters() -> None:
    assert passage_widths([5000, 300, 5000], 900, None) == [900, 900, 900]


def test_with_shares_the_best_ranked_get_more_and_the_total_is_kept() -> None:
    shares = [rank_share(rank) for rank in range(1, 6)]
    widths = passage_widths([5000] * 5, 900, shares)
    assert widths == sorted(widths, reverse=True) and widths[0] > 900 > widths[-1]
    assert 900 * 5 - 5 <= sum(widths) <= 900 * 5


def test_a_short_passage_is_shown_whole_and_leaves_its_room_to_the_others() -> None:
    shares = [rank_share(rank) for rank in range(1, 4)]
    alone = passage_widths([5000, 5000, 5000], 900, shares)
    widths = passage_widths([5000, 200, 5000], 900, shares)
    assert widths[1] == 200
    assert widths[0] > alone[0] and widths[2] > alone[2] and sum(widths) <= 900 * 3


def test_every_passage_shorter_than_its_share_is_shown_whole() -> None:
    assert passage_widths([100, 2000, 50], 900, [2.0, 1.0, 1.0]) == [100, 2000, 50]


def test_ranks_past_the_table_get_the_last_share() -> None:
    assert rank_share(1) == RANK_SHARES[0] and rank_share(50) == RANK_SHARES[-1]


def test_a_passage_that_fits_in_context_is_shown_whole_at_any_rank() -> None:
    shares = [rank_share(rank) for rank in range(1, 6)]
    widths = passage_widths([5000, 5000, 5000, 5000, 850], 900, shares)
    assert widths[4] == 850 and widths[3] < 850


def test_a_passage_a_little_longer_than_its_part_is_shown_whole_and_a_longer_one_is_cut() -> None:
    shares = [rank_share(rank) for rank in range(1, 4)]
    part = passage_widths([5000, 5000, 5000], 900, shares)[1]  # the second hit's part of the budget
    nearly = int(part * (1 + NEARLY_WHOLE))
    assert passage_widths([5000, nearly, 5000], 900, shares)[1] == nearly  # its last lines are not cut
    widths = passage_widths([5000, nearly + 200, 5000], 900, shares)
    assert part - 5 <= widths[1] < nearly  # a passage longer still is cut to about its part
