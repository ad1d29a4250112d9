"""How many characters of its passage each hit of a search result shows.

Re-ranked results (search.rerank) share one budget: `context` times the number of hits (up to a
tenth more, below). A passage no longer than `context` is shown whole, as with a fixed width; the
longer ones share the rest in proportion to their rank's share (RANK_SHARES): the best-ranked get
more, since the answer is most often there and a long chunk then fits whole. A hit whose passage is shorter
than its share shows it whole and leaves the rest to the others, and one at most NEARLY_WHOLE
longer than its share is shown whole too (its last lines cost little and were sometimes the
answer: a list's last item). Without re-ranking every hit shows at most `context` characters.
"""

from __future__ import annotations

from collections.abc import Sequence

# Tuned on bench/data/passages_queries.json's tune split (bench/passages.py measures them).
RANK_SHARES = (2.0, 1.25, 0.75, 0.5, 0.5)  # relative shares of ranks 1..5; later ranks get the last one
# Chosen with bench/rank_sweep.py on its tuning sets, fresh6 among them: 0.1, 0.2 and 0.3 each show one
# more answer (fresh6 hard) and lose none; 0.1 costs the least text (docs/ranking.md).
NEARLY_WHOLE = 0.1


def rank_share(rank: int) -> float:
    """The relative share of the budget of the hit at `rank` (1 = best)."""
    return RANK_SHARES[min(max(rank, 1), len(RANK_SHARES)) - 1]


def passage_widths(lengths: Sequence[int], context: int, shares: Sequence[float] | None) -> list[int]:
    """Characters to show of each passage (whole `lengths`, best first): `context` each without
    `shares`; with them, passages up to `context` whole and the rest of `context` per hit split
    among the longer ones in proportion to `shares` (never more than a passage's length), and a
    passage at most NEARLY_WHOLE longer than its part whole."""
    if shares is None:
        return [context] * len(lengths)
    widths = [min(length, context) for length in lengths]
    budget = float(context * len(lengths) - sum(w for w, length in zip(widths, lengths, strict=True) if w == length))
    waiting = [i for i, length in enumerate(lengths) if length > context]
    while waiting:
        total = sum(shares[i] for i in waiting)
        whole = [i for i in waiting if lengths[i] <= budget * shares[i] / total]
        if not whole:
            for i in waiting:
                widths[i] = int(budget * shares[i] / total)
            break
        for i in whole:
            widths[i] = lengths[i]
            budget -= lengths[i]
        waiting = [i for i in waiting if i not in whole]
    return [
        length if length <= width * (1 + NEARLY_WHOLE) else width for width, length in zip(widths, lengths, strict=True)
    ]
