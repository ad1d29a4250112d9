"""The structural bounds converters check before parsing, and the converter contract's helpers."""

from __future__ import annotations

import io
import zipfile

import pytest

from mcp_analysis.errors import IngestError, IngestLimitError, UnsupportedFormatError
from mcp_analysis.ingest import formats
from mcp_analysis.ingest.formats import docx, html, markdown
from mcp_analysis.ingest.formats.base import BoundedZip, Converted, Source, check_items
from mcp_analysis.ingest.limits import MB, Limits


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as packed:
        for name, data in members.items():
            packed.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_declaring_more_than_the_unpacked_bound_is_refused_before_unpacking() -> None:
    bomb = _zip({"word/document.xml": b"\0" * (3 * MB)})
    assert len(bomb) < 10_000
    with pytest.raises(IngestLimitError, match=r"unpacks to 3 MB, over the limit of 2 MB .*ingest\.max_unpacked_mb"):
        BoundedZip(Source(bomb, "bomb.docx", Limits(max_unpacked_bytes=2 * MB)))
    assert BoundedZip(Source(bomb, "bomb.docx", Limits(max_unpacked_bytes=4 * MB))).read("word/document.xml")


def test_a_damaged_zip_is_a_clear_refusal() -> None:
    with pytest.raises(IngestError, match="not a valid zip-based file"):
        BoundedZip(Source(b"PK\x03\x04 not really", "x.docx"))


def test_docx_paragraphs_are_counted_across_unpacked_pieces() -> None:
    body = b"<w:body>" + b"<w:p><w:r><w:t>x</w:t></w:r></w:p>" * 70_000 + b"<w:p/></w:body>"  # > 1 MB: pieces
    source = Source(_zip({"word/document.xml": body}), "many.docx", Limits(max_items=100_000))
    assert docx.count_paragraphs(source) == 70_001
    with pytest.raises(IngestLimitError, match=r"at least \d\d,\d+ paragraphs, over the limit of 50,000"):
        docx.count_paragraphs(Source(source.data, "many.docx", Limits(max_items=50_000)))


@pytest.mark.parametrize(
    ("markup", "depth"),
    [
        ("<div>" * 300 + "x" + "</div>" * 300, 257),  # stops counting past the limit
        ("<ul>" + "<li>item " * 5000 + "</ul>", 2),  # unclosed <li>: siblings, as a browser builds them
        ("<body>" + "<p>para " * 5000, 2),  # unclosed <p>: siblings
        ("<table>" + "<tr><td>a<td>b" * 3000 + "</table>", 3),
        ("<div>" + "<br><img src=x><hr/>" * 1000 + "</div>", 1),  # void elements open nothing
    ],
)
def test_html_depth_is_measured_as_a_browser_nests_elements(markup: str, depth: int) -> None:
    assert html.nesting_depth(Source(markup.encode(), "x.html", Limits(max_depth=256))) == depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (">" * 5000 + " deep\n", 5000),
        ("> " * 300 + "quote\n", 300),
        ("".join("  " * level + "- item\n" for level in range(300)), 299),
        ("# Title\n\n> a quote\n\n- a\n  - b\n", 0),  # nothing near the limit: one scan, no count
    ],
)
def test_markdown_depth_counts_quote_markers_and_list_indentation(text: str, depth: int) -> None:
    assert markdown.nesting_depth(text.encode(), 256) == depth


def test_a_registered_converter_gets_the_bytes_the_name_and_the_bounds() -> None:
    seen: list[Source] = []

    def convert(source: Source) -> Converted:
        seen.append(source)
        check_items(source, 11, "rows")
        raise AssertionError("check_items should have refused 11 rows")

    formats.register([".zzz-test"], convert)
    found = formats.for_file("Report.ZZZ-TEST", b"head")
    with pytest.raises(IngestLimitError, match=r"at least 11 rows, over the limit of 10 .*ingest\.max_items"):
        found.convert(Source(b"bytes", "Report.ZZZ-TEST", Limits(max_items=10)))
    assert seen[0].data == b"bytes" and seen[0].stem == "Report" and seen[0].suffix == ".zzz-test"


def test_files_without_a_known_suffix() -> None:
    assert formats.for_file("README", b"plain words\n").text
    with pytest.raises(UnsupportedFormatError, match="no file extension, and the content is not text"):
        formats.for_file("blob", b"\x7fELF\x00\x01")
    with pytest.raises(UnsupportedFormatError, match=r"unsupported file type '\.heic' \(supported: \.md"):
        formats.for_file("photo.heic", b"")


def test_a_converter_registered_by_module_name_is_imported_when_first_used() -> None:
    formats.register([".zzz-md"], "mcp_analysis.ingest.formats.markdown", text=True)
    converted = formats.for_file("notes.zzz-md", b"").convert(Source(b"# Notes\n\nA line.\n", "notes.zzz-md"))
    assert converted.format == "markdown"
    assert [t.text for t in converted.document.texts] == ["Notes", "A line."]
