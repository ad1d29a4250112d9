"""A Markdown file's HTML blocks keep every sentence, in order, as an HTML page does.

docling reads a Markdown document with HTML blocks a second time, serialised to HTML, with its
HTML backend, which drops or moves the text around nested lists: each HTML shape of
test_html_text.py that starts a block is written here as one, between Markdown paragraphs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ingest.test_html_text import HELD, LOST, assert_in_order, page_text

_SENTENCE = re.compile(r"\b[A-Z][a-z]+ \d+\.")


def _blocks(shapes: list) -> list:  # type: ignore[type-arg]
    """The shapes that open an HTML block (a tag first), as a Markdown file writes one."""
    return [shape for shape in shapes if shape.values[0].startswith("<")]


def _check(tmp_path: Path, block: str) -> None:
    page = tmp_path / "notes.md"
    page.write_text(f"# Opening 0.\n\nLead 97.\n\n- Item 98.\n\n{block}\n\nClosing 99.\n", "utf-8")
    sentences = ["Opening 0.", "Lead 97.", "Item 98.", *_SENTENCE.findall(re.sub(r"<[^>]+>", " ", block))]
    assert_in_order([*sentences, "Closing 99."], page_text(page))  # page_text: and no lost-text warning


@pytest.mark.parametrize("block", _blocks([*LOST, *HELD]))
def test_an_html_block_keeps_the_text_around_its_nested_lists_in_order(tmp_path: Path, block: str) -> None:
    """The shapes docling's HTML backend read text out of (LOST), and those it read whole (HELD)."""
    _check(tmp_path, block)


def test_markdown_without_html_blocks_converts_as_doclings_own_backend_does(tmp_path: Path) -> None:
    from docling.backend.md_backend import MarkdownDocumentBackend
    from docling.datamodel.base_models import InputFormat

    from mcp_analysis.ingest.formats._docling import run_backend
    from mcp_analysis.ingest.formats.base import Source
    from mcp_analysis.ingest.items import extract_items, render_content

    page = tmp_path / "plain.md"
    page.write_text(
        "# Title 1.\n\nSome *inline <b>html</b>* 2.\n\n- Item 3.\n  - Nested 4.\n\n| A | B |\n|---|---|\n| x | y |\n"
    )
    theirs = run_backend(Source(page.read_bytes(), page.name), InputFormat.MD, MarkdownDocumentBackend, "markdown")
    assert page_text(page) == re.sub(r"\s+", " ", render_content(extract_items(theirs)))


def test_an_html_block_nested_deeper_than_the_limit_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """As an HTML page is (html.py): the HTML parser's cost grows with the depth. The limit bounds
    each block, not the document serialised to HTML (where a Markdown list is two levels a step)."""
    from mcp_analysis.errors import IngestError
    from mcp_analysis.ingest.items import extract_items, render_content
    from tests.format_files import convert_file

    page = tmp_path / "deep.md"
    page.write_text("# Opening 0.\n\n" + "<div>" * 40 + "Deep 1." + "</div>" * 40 + "\n", "utf-8")
    assert_in_order(["Opening 0.", "Deep 1."], page_text(page))  # within the default limit
    with pytest.raises(IngestError, match=r"nested \d+ levels deep, over the limit of 32 \(raise ingest\.max_depth"):
        convert_file(page, max_depth=32)
    listed = tmp_path / "listed.md"
    steps = "".join(f"{'  ' * n}- Step {n}.\n" for n in range(20))
    listed.write_text(f"{steps}\n<div><div>Block 1.</div></div>\n", "utf-8")
    text = re.sub(r"\s+", " ", render_content(extract_items(convert_file(listed, max_depth=32).document)))
    assert_in_order([*(f"Step {n}." for n in range(20)), "Block 1."], text)
