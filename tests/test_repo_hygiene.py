"""Code and tests name behaviour, never the issue or the work round that brought them.

An issue number ("issue 8 item 5", "#12", "round 3") means nothing to the next reader without
the tracker, and goes stale when the work is done: comments say what holds and why, and tests
are named after the behaviour they check. This scans the comments, docstrings and function
names of every Python file in mcp_analysis/, tests/, bench/ and tools/.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

FOLDERS = ("mcp_analysis", "tests", "bench", "tools")

#: "issue 8", "issues 8-12", "Issue #12", "test_issue_8"; "#12" alone; "round 3", "phase 2";
#: "PR 7", "pull request #7". A letter before the word ("around 2") does not count.
REFERENCE = re.compile(
    r"(?<![a-z])issues?[\s#_-]*\d+"
    r"|(?<![\w#&/])#\d+\b"
    r"|(?<![a-z])(?:round|phase|sprint|milestone)[\s_-]*\d+"
    r"|\bPR[\s#_-]*\d+|(?<![a-z])pull[\s_-]request[\s#_-]*\d+",
    re.IGNORECASE,
)


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment, docstring and function or class name in `source`."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.lineno, node.name
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def references(source: str) -> list[tuple[int, str]]:
    """(line, what matched) for each issue or work-round reference in `source`'s prose."""
    return [(line, match.group()) for line, text in prose(source) for match in REFERENCE.finditer(text)]


def python_files() -> list[Path]:
    this = Path(__file__).resolve()
    files = (path for folder in FOLDERS for path in sorted((REPO / folder).rglob("*.py")))
    return [path for path in files if path.resolve() != this and ".venv" not in path.parts]


def test_no_comment_docstring_or_name_cites_an_issue() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {match!r}"
        for path in python_files()
        for line, match in references(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "say what holds and why instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        '"""Failures found at the edges (issue 8), each reproduced."""\n',
        "x = 1  # the real case from Issue #12\n",
        "def test_issue_8_item_5() -> None:\n    pass\n",
        '"""Context economy (issues 8-12)."""\n',
        "# fixed in #431\n",
        "# added in round 3 of the hardening\n",
        "class Phase2Check:\n    pass\n",
        "# see PR 17\n",
    ],
)
def test_the_check_catches_made_up_references(source: str) -> None:
    assert references(source), source


@pytest.mark.parametrize(
    "source",
    [
        '"""A chunk cites its item by self_ref (#/texts/5)."""\n',
        "# around 2 s on a busy machine; round(x, 2) keeps two decimals\n",
        "def test_a_hit_lists_issued_handles() -> None:\n    pass\n",
        "colour = '#123456'  # strings that are not prose are data\n",
        "# the 6th request had no tools; 4 documents mention vulnerabilities\n",
    ],
)
def test_the_check_leaves_ordinary_text_alone(source: str) -> None:
    assert references(source) == [], source
