"""An execution's value, rendered by the server: within its limit and in bounded memory, whatever
the sandbox built (shared references, forged search hits, deep nesting); small values as Python does.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.presentation import value_repr
from mcp_analysis.session.analysis import AnalysisSession

pytestmark = pytest.mark.anyio

LIMIT = 50_000
MB = 1_000_000


def peak_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn()'s result and the most memory it held at once (Python allocations)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


SHARED = "x" * MB  # one string, referenced many times: cheap to hold, huge to print


@pytest.mark.parametrize(
    "name, value",
    [
        ("list of one string many times", [SHARED] * 300),
        ("dict of one string many times", dict.fromkeys(range(300), SHARED)),
        ("tuple of lists", tuple([[SHARED] * 10] * 30)),
        ("set of large strings", {SHARED + str(i) for i in range(50)}),
        ("bytes in a list", [SHARED.encode()] * 300),
    ],
)
def test_an_execution_value_renders_within_its_limit(name: str, value: Any) -> None:
    # The sandbox holds these in ~1-50 MB; rendered whole, they would build a 300 MB string on the
    # server's event loop ([s] * 3000: 12 s and 3 GB of the server's memory).
    text, peak = peak_bytes(lambda: value_repr(value, LIMIT))
    assert LIMIT <= len(text) <= LIMIT + 200, name
    assert text.endswith("characters: print or slice the part you need]"), text[-120:]
    assert peak < 2 * MB, f"{name}: rendering held {peak:,} bytes"


def test_small_values_render_as_python_does() -> None:
    values = [[1, "a", b"b", 2.5, None, True], (1,), (), {"k": [1, 2]}, {1, 2}, frozenset({3}), set()]
    for value in values:
        assert value_repr(value, LIMIT) == repr(value)
    assert value_repr(10**5000, LIMIT).startswith("<int of 5,001 digits")
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert "repr failed" in value_repr(deep, LIMIT)


FORGE = """
s = 'x' * 1_000_000
class P:
    pass
p = P()
p.many = [s] * 200
class _Record:
    pass
r = _Record()
r._kind = 'hit'
r.rank = 1
r.chunk_id = s
r.document_id = 'd'
r.document_title = s
r.headings = [s] * 200
r.page_numbers = list(range(100_000))
r.excerpt = s
r.content = s + s
"""


@pytest.mark.parametrize("expression", ["[s] * 200", "p", "r", "[r] * 100", "{'k': (r, p)}"])
async def test_sandbox_values_cannot_make_the_server_render_something_huge(kb: KnowledgeBase, expression: str) -> None:
    # A class instance or a forged search hit (`_Record`, the prelude's class) whose attributes
    # share one big string: rendered reference by reference, it would fill the server's memory
    # on its event loop; the render stops at the limit.
    async with AnalysisSession(kb) as session:
        assert (await session.execute(FORGE)).success
        tracemalloc.start()
        try:
            result = await session.execute(expression)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.success, result.error
        assert result.value is not None and len(result.value) <= kb.settings.sandbox.max_output_chars + 200
        assert "characters: print or slice the part you need]" in result.value
        assert peak < 30 * MB, f"rendering {expression} held {peak:,} bytes on the server"
        if expression == "r":
            assert result.value.startswith("Hit(rank=1, chunk_id='xxx")
        still = await session.execute("len(s)")
        assert still.value == "1000000"
