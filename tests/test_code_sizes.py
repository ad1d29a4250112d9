"""Sizes that read: no module of the package over 450 lines, no function over 100.

A newcomer reads a module top to bottom and a function on one screen or two; past these
sizes a module holds several concerns and a function several steps, which are better
split by concern (the check names each offender and its size, so the split is targeted).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mcp_analysis"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 100


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method longer than `limit` lines."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    lines = (child.end_lineno or child.lineno) - start + 1
                    if lines > limit:
                        found.append((name, lines))
                visit(child, name + ".")

    visit(ast.parse(source), "")
    return found


def test_no_module_is_longer_than_a_module_should_be() -> None:
    too_long = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_no_function_is_longer_than_a_function_should_be() -> None:
    too_long = {
        f"{path.relative_to(PACKAGE)}:{name}": n
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, n in long_functions(path.read_text(), MAX_FUNCTION_LINES)
    }
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"


@pytest.mark.parametrize(("body_lines", "expected"), [(98, []), (99, [("f", 101)])])
def test_the_function_check_counts_decorators_and_body(body_lines: int, expected: list[tuple[str, int]]) -> None:
    source = "@decorator\ndef f():\n" + "    x = 1\n" * body_lines
    assert long_functions(source, MAX_FUNCTION_LINES) == expected
