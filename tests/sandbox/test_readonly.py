"""Which snippets only look, and what makes a session's looking snippets untrustworthy for good."""

from __future__ import annotations

import pytest

from mcp_analysis.sandbox.presentation import PRELUDE
from mcp_analysis.sandbox.readonly import Purity

LOOKING = [
    "len(rows)",
    "rows[:3]",
    "rows[-1]",
    "print(len(rows), rows[0], sep=', ')",
    "print(f'{len(rows):,} rows, the first {rows[0]!r}')",
    "total / len(rows) > 0.5 and not done",
    "{'n': len(rows), 'first': rows[0]}",
    "hits[0].content[:200]",
    "print(hits[0])",
    "len(rows)\nrows[0]",
]
CHANGING = [
    "rows = []",
    "rows.append(1)",
    "rows.sort()",
    "rows[0] = 1",
    "del rows[0]",
    "total += 1",
    "(n := len(rows))",
    "2 in it",  # advances an iterator
    "[r for r in rows]",  # iterates: an iterator would be consumed
    "list(it)",
    "print(*it)",
    "next(it)",
    "print(rows, file=log)",
    "await search('harbour')",
    "sorted(rows)",
    "f(rows)",
    "",
]
SPOILING = [
    "class Row:\n    pass",
    "len = lambda rows: 0",
    "def print(*args):\n    pass",
    "from collections import defaultdict",
    "import collections as c",
    "hit.content = 'x'",
    "_hit_repr = lambda hit: ''",  # the prelude's repr of a hit calls it
    "repr = str",  # so does the prelude
    "Row = type('Row', (), {})",
    "for str in rows:\n    pass",
    "type X = int",  # a newer syntax than this Python parses: unknown, so spoiled
    # a record of the caller's values: printing it would consume the iterator
    "hit = _Record('hit', {'headings': iter(['h1', 'h2'])})",
    "hit.__init__('hit', {'headings': iter(['h1'])})",
    "hit._fields.append('x')",
]


@pytest.mark.parametrize("code", LOOKING)
def test_a_snippet_that_only_looks_may_skip_its_dump(code: str) -> None:
    purity = Purity(known=True, prelude=PRELUDE)
    assert not purity.ran("rows = [1, 2]")  # a change: dumped, spoils nothing
    assert purity.ran(code) and not purity.lost


@pytest.mark.parametrize("code", CHANGING)
def test_a_snippet_that_may_change_something_is_dumped(code: str) -> None:
    purity = Purity(known=True, prelude=PRELUDE)
    assert not purity.ran(code)
    assert purity.ran("len(rows)")  # an ordinary change spoils nothing for later snippets


@pytest.mark.parametrize("code", SPOILING)
def test_a_snippet_that_could_make_reading_run_code_spoils_the_session_for_good(code: str) -> None:
    purity = Purity(known=True, prelude=PRELUDE)
    assert not purity.ran(code)
    assert purity.lost and not purity.ran("len(rows)")


def test_a_session_restored_from_a_dump_never_skips() -> None:
    assert not Purity(known=False, prelude=PRELUDE).ran("len(rows)")


def test_names_the_prelude_uses_only_inside_its_functions_stay_free() -> None:
    purity = Purity(known=True, prelude=PRELUDE)
    assert not purity.ran("rows = [1]\ndata = {}\nspec = None\nfields = []")  # locals of the prelude's functions
    assert purity.ran("len(rows)")
