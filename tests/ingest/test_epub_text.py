"""Every sentence of an e-book's chapters reaches the document's text, in reading order.

The chapter shapes are HTML's (test_html_text.py): docling's EPUB backend reads its chapters
with docling's HTML backend, which drops or moves the text around nested lists. Each book is
built here, a zip of the files an EPUB reader needs (mimetype, container, package, chapters).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from mcp_analysis.ingest.items import extract_items, render_content
from tests.format_files import convert_file
from tests.ingest.test_html_text import HELD, LOST, assert_in_order, page_text

_SENTENCE = re.compile(r"\b[A-Z][a-z]+ \d+\.")
_CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


def write_book(path: Path, chapters: list[str]) -> Path:
    """An EPUB 3 whose spine is `chapters` (XHTML bodies), in that order."""
    items = "".join(
        f'<item id="c{n}" href="text/c{n}.xhtml" media-type="application/xhtml+xml"/>' for n in range(len(chapters))
    )
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
    package = (
        '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">book</dc:identifier><dc:title>Book</dc:title><dc:language>en</dc:language>'
        f"</metadata><manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", _CONTAINER)
        book.writestr("OEBPS/content.opf", package)
        for n, body in enumerate(chapters):
            book.writestr(
                f"OEBPS/text/c{n}.xhtml",
                '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
                f"<head><title>Chapter {n}</title></head><body>{body}</body></html>",
            )
    return path


def _check(tmp_path: Path, body: str) -> None:
    book = write_book(tmp_path / "book.epub", ["<p>Opening 0.</p>", body, "<p>Closing 99.</p>"])
    sentences = ["Opening 0.", *_SENTENCE.findall(re.sub(r"<[^>]+>", " ", body)), "Closing 99."]
    assert_in_order(sentences, page_text(book))  # page_text: and no lost-text warning


@pytest.mark.parametrize("body", [*LOST, *HELD])
def test_a_chapter_keeps_the_text_around_its_nested_lists_in_order(tmp_path: Path, body: str) -> None:
    """The shapes docling's HTML backend read text out of (LOST), and those it read whole (HELD)."""
    _check(tmp_path, body)


def test_chapters_come_in_spine_order_with_their_links_reduced_to_anchors(tmp_path: Path) -> None:
    book = write_book(
        tmp_path / "book.epub",
        [
            '<h1>First 1.</h1><p>See <a href="c1.xhtml#note">Note 2.</a></p>',
            '<h1>Second 3.</h1><p id="note">Body 4.</p>',
        ],
    )
    assert_in_order(["First 1.", "Note 2.", "Second 3.", "Body 4."], page_text(book))


def test_a_chapter_nested_deeper_than_the_limit_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """As an HTML page is (html.py): the parser's cost grows with the depth."""
    from mcp_analysis.errors import IngestError
    from tests.format_files import convert_file

    book = write_book(tmp_path / "deep.epub", ["<p>Opening 0.</p>", "<div>" * 40 + "Deep 1." + "</div>" * 40])
    assert_in_order(["Opening 0.", "Deep 1."], page_text(book))  # within the default limit
    with pytest.raises(IngestError, match=r"nested \d+ levels deep, over the limit of 32 \(raise ingest\.max_depth"):
        convert_file(book, max_depth=32)


def test_a_chapter_that_cannot_be_read_is_a_warning_of_the_book_and_the_others_go_in(tmp_path: Path) -> None:
    """The spine names a chapter the archive lacks: the book without it, and a warning the add's
    report shows (a log line inside the conversion worker would reach it at DEBUG only)."""
    whole = write_book(tmp_path / "whole.epub", ["<p>Opening 0.</p>", "<p>Middle 1.</p>", "<p>Closing 99.</p>"])
    broken = tmp_path / "book.epub"
    with zipfile.ZipFile(whole) as source, zipfile.ZipFile(broken, "w") as target:
        for member in source.infolist():
            if not member.filename.endswith("c1.xhtml"):
                target.writestr(member, source.read(member))
    converted = convert_file(broken)
    text = render_content(extract_items(converted.document))
    assert "Opening 0." in text and "Closing 99." in text and "Middle 1." not in text
    (warning,) = converted.warnings
    assert warning.startswith("chapter OEBPS/text/c1.xhtml could not be read"), warning
