"""What every tool result shares: its cost against the budget, fitting a list into it, page spans.

A result is a structured model (the output schema) plus compact text for the model; both
hold the same facts, the text as a compact rendering (one line per item, no repeated key
names), not a JSON copy. Its cost is ``len(text) + len(json.dumps(structured,
ensure_ascii=False))``; each shaper keeps that within ``server.max_result_chars`` by
shrinking its own lists or passages, and says where the rest is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def size(model: BaseModel, text: str) -> int:
    """What a result costs: its text plus its structured content as JSON."""
    return cost(model.model_dump(mode="json"), text)


def cost(structured: dict[str, Any], text: str) -> int:
    """`size` for a model already dumped to JSON-ready data."""
    return len(text) + len(json.dumps(structured, ensure_ascii=False))


def largest_fit(build: Callable[[int], tuple[M, str]], n: int, budget: int) -> tuple[M, str]:
    """build(k) for the largest k <= n whose result fits the budget (k = 0 must fit)."""
    model, text = build(n)
    if size(model, text) <= budget:
        return model, text
    lo, hi = 0, n - 1
    while lo < hi:  # the largest k in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        if size(*build(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return build(lo)


def page_span(pages: list[int]) -> str:
    """` · p. 3-5` for consecutive pages, ` · p. 2, 7` otherwise, nothing without pages."""
    if not pages:
        return ""
    if len(pages) > 1 and pages == list(range(pages[0], pages[-1] + 1)):
        return f" · p. {pages[0]}-{pages[-1]}"
    return " · p. " + ", ".join(map(str, pages))
