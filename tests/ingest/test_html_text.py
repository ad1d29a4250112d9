"""Every sentence of an HTML file reaches the document's text, in the order a reader sees it.

Each page goes through the converter the registry picks for `.html` (what `mcp-analysis add`
runs in its conversion worker) and out as `content.txt` has it (`extract_items` +
`render_content`). Sentences are written `Word 12.` so each is found as written, exactly once.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.ingest.formats import _docling
from mcp_analysis.ingest.formats.base import Source
from mcp_analysis.ingest.formats.html_backend import OPTIONS, HTMLBackend, convert_checked, missing_letters
from mcp_analysis.ingest.items import extract_items, render_content
from tests.format_files import convert_file

DATA = Path(__file__).parent / "data"
SAMPLE = Path(__file__).parents[2] / "mcp_analysis" / "sample" / "documents"
GUARD = "mcp_analysis.ingest.formats.html_backend"
_SENTENCE = re.compile(r"\b[A-Z][a-z]+ \d+\.")

_CONTAINERS = {
    "li": ("<ul><li>", "</li></ul>"),
    "ol-li": ("<ol><li>", "</li></ol>"),
    "dd": ("<dl><dt>Term 90.</dt><dd>", "</dd></dl>"),
    "blockquote": ("<blockquote>", "</blockquote>"),
    "div": ("<div>", "</div>"),
    "td": ("<table><tr><td>", "</td><td>Cell 91.</td></tr></table>"),
    "details": ("<details><summary>Summary 92.</summary>", "</details>"),
}
_NESTED = {
    "ul": "<ul><li>Inner 10.</li><li>Inner 11.</li></ul>",
    "ol": "<ol><li>Inner 10.</li><li>Inner 11.</li></ol>",
    "dl": "<dl><dt>Inner 10.</dt><dd>Inner 11.</dd></dl>",
    "table": "<table><tr><td>Inner 10.</td><td>Inner 11.</td></tr></table>",
    "pre": "<pre>Inner 10.\nInner 11.</pre>",
}
_DOCLING_MOVED = {("li", n) for n in ("ul", "ol", "dl", "table")} | {("ol-li", n) for n in ("ul", "ol", "dl", "table")}
_DOCLING_MOVED |= {("dd", n) for n in ("ul", "ol", "dl", "table")}


def _text_around(container: str, nested: str, wrap: bool) -> str:
    start, end = _CONTAINERS[container]
    a, b = ("<p>", "</p>") if wrap else ("", "")
    body = f"{a}Before 1.{b}{_NESTED[nested]}{a}After 20.{b}{a}After 21.{b}"
    return f"{start}{body}{end}<p>Outside 30.</p>"


# Not td>table: docling writes a table whose cell holds a table as a table first (the cell's
# text without the inner table) and then the cell's content, the inner table included.
_AROUND = [
    pytest.param(_text_around(c, n, wrap), id=f"{c}>{n}{'-p' if wrap else ''}")
    for c in _CONTAINERS
    for n in _NESTED
    for wrap in (True, False)
    if (c, n) != ("td", "table")
]

# Shapes docling's own backend read text out of (dropped it or moved it before a nested list).
LOST = [
    *(p for p in _AROUND if tuple(p.id.removesuffix("-p").split(">")) in _DOCLING_MOVED),
    pytest.param(
        "<dl><dt>Term 1.</dt><dd><p>Intro 2.</p><dl><dt>Arg 3.</dt><dd>Desc 4.</dd></dl>"
        "<p>Outro 5.</p><p>Outro 6.</p></dd></dl><p>Outside 7.</p>",
        id="dd>dl (Texinfo)",
    ),
    pytest.param(
        "<dl><dt>Term 1.</dt><dd><dl><dt>Arg 2.</dt><dd>Desc 3.</dd></dl><p>Tail 4.</p></dd></dl>",
        id="dd>dl then text only",
    ),
    pytest.param(
        "<dl><dt>Term 1.</dt><dd><p>Intro 2.<dl><dt>Arg 3.</dt><dd>Desc 4.</dd></dl>Outro 5.</p></dd></dl>",
        id="dd>p>dl (the <p> left open)",
    ),
    pytest.param(
        "<dl><dt>Term 1.</dt><dd><div><p>Intro 2.</p><dl><dt>Arg 3.</dt><dd>Desc 4.</dd></dl>"
        "<p>Outro 5.</p></div><p>Outro 6.</p></dd></dl>",
        id="dd>div>dl",
    ),
    pytest.param("<dl><dd><dl><dt>Arg 1.</dt><dd>Desc 2.</dd></dl></dd></dl>", id="dd>dl without a term"),
    pytest.param("<ul><li><ul><li>Inner 1.</li></ul>Tail 2.</li><li>Next 3.</li></ul>", id="li: text only after"),
    pytest.param(
        "<ul><li>Head 1.<ul><li>One 2.</li></ul>Middle 3.<ol><li>Two 4.</li></ol>End 5.</li></ul>", id="li: two lists"
    ),
    pytest.param(
        "<ul><li>Ab 1.<ul><li>Cd 2.<ul><li>Ef 3.</li></ul>Gh 4.</li></ul>Ij 5.</li></ul>", id="li: nested three deep"
    ),
    pytest.param(
        "<ol><li><p>First 1.</p><ol><li>Inner 2.</li></ol><p>Third 3.</p><img src='x.png' alt='x'>"
        "<p>Fourth 4.</p></li></ol>",
        id="li: paragraphs and an image after a list",
    ),
    pytest.param("<dl><dt>Term 1.<ul><li>Item 2.</li></ul>Tail 3.</dt><dd>Desc 4.</dd></dl>", id="dt>ul"),
    pytest.param(
        "<dl>Loose 1.<dt>Term 2.</dt><p>Loose 3.</p><dd>Desc 4.</dd>Loose 5.</dl>", id="dl: loose text and elements"
    ),
    pytest.param("<p>Lead 1.</p><div>Lead 2.</div><h2>Heading 3.</h2><p>Body 4.</p>", id="text before the heading"),
    pytest.param(
        "<blockquote><p>Quote 1.</p><footer>Author 2.</footer></blockquote>"
        "<article><p>Story 3.</p><footer>Byline 4.</footer></article>",
        id="footer of a quote and an article",
    ),
]

# Shapes docling read whole already: kept here so the subclass never breaks them.
HELD = [
    *(p for p in _AROUND if tuple(p.id.removesuffix("-p").split(">")) not in _DOCLING_MOVED),
    pytest.param("<p>Start 1. <b>Bold 2.</b> Tail 3. <a href='x'>Link 4.</a> Tail 5. <code>x</code> Tail 6.</p>"),
    pytest.param("Body 1.<p>Para 2.</p>Body 3.", id="text directly in body"),
    pytest.param("<div>Line 1.<br>Line 2.<br/>Line 3.</div>Line 4.<br>Line 5.", id="br-separated"),
    pytest.param("<div><span>Span 1.</span> Tail 2.<div>Inner 3.</div> Tail 4.</div>", id="div tails"),
    pytest.param("<ul>Stray 1.<li>Item 2.</li>Stray 3.<li>Item 4.</li>Stray 5.</ul>", id="ul: loose text"),
    pytest.param("<ul><li>Before 1.<pre>Code 2.</pre>After 3.</li></ul>", id="li>pre"),
    pytest.param("<ul><li>Before 1.<img src='x.png' alt='x'>After 2.</li></ul>", id="li>img"),
    pytest.param(
        "<blockquote><p>Quote 1.</p><blockquote><p>Quote 2.</p></blockquote><p>Quote 3.</p></blockquote>",
        id="blockquote>blockquote",
    ),
]


def page_text(path: Path) -> str:
    """`path` converted as `add` converts it, as content.txt has it, whitespace runs as one space; the
    conversion's check finds no text lost (no warning of the file)."""
    converted = convert_file(path)
    assert not converted.warnings, converted.warnings
    return re.sub(r"\s+", " ", render_content(extract_items(converted.document)))


def assert_in_order(sentences: list[str], text: str) -> None:
    """Each of `sentences` is in `text`, each after the one before."""
    position = 0
    for sentence in sentences:
        found = text.find(sentence, position)
        assert found >= 0, f"{sentence!r} is not in the document after {text[:position][-80:]!r}:\n{text}"
        position = found + len(sentence)


def _check(tmp_path: Path, body: str) -> None:
    page = tmp_path / "page.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>T</title></head><body>{body}</body></html>", "utf-8")
    sentences = _SENTENCE.findall(re.sub(r"<[^>]+>", " ", body))
    assert sentences
    assert_in_order(sentences, page_text(page))  # page_text: and no lost-text warning


@pytest.mark.parametrize("body", [*LOST, *HELD])
def test_text_around_nested_lists_reaches_the_document_in_order(tmp_path: Path, body: str) -> None:
    """The shapes docling's backend read text out of (LOST), and those it read whole (HELD)."""
    _check(tmp_path, body)


def test_a_texinfo_function_keeps_the_paragraphs_around_its_argument_table() -> None:
    """libffi's manual (Texinfo 6.8; Expat licence, see data/README.md): `ffi_prep_closure_loc`."""
    text = page_text(DATA / "libffi-closure-api.html")
    assert_in_order(
        [
            "Prepare a closure function. The arguments to ffi_prep_closure_loc are:",
            "The address of a ffi_closure object",
            "The function which will be called when the closure is invoked. It is called with the arguments:",
            "The ffi_cif passed to ffi_prep_closure_loc.",
            "The same user_data that was passed to ffi_prep_closure_loc.",
            "ffi_prep_closure_loc will return FFI_OK if everything went ok",
            "After calling ffi_prep_closure_loc, you can cast codeloc to the appropriate pointer-to-function type.",
            "You may see old code referring to ffi_prep_closure.",
        ],
        text,
    )


def test_the_menus_before_the_first_heading_stay_out_while_the_introduction_comes_in(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><nav><a href='/'>Homepage</a> <a href='/a'>Archive</a></nav>"
        "<div role='navigation'><ul><li>Sitemap</li></ul></div><p>Lead 1.</p><h1>Title 2.</h1><p>Body 3.</p>"
        "<nav><a href='#x'>Contents 4.</a></nav></body></html>",
        "utf-8",
    )
    text = page_text(page)
    assert_in_order(["Lead 1.", "Title 2.", "Body 3.", "Contents 4."], text)
    assert not {"Homepage", "Archive", "Sitemap"} & set(text.split())


@pytest.mark.parametrize(
    ("body", "left_out"),
    [
        ("<nav><p>Intro 1.</p><h1>Title 2.</h1><p>Body 3.</p></nav>", None),
        ("<div role='navigation'><p>Intro 1.</p><h1>Title 2.</h1><p>Body 3.</p></div>", None),
        ("<nav><h1>Site 1.</h1><p>Links 2.</p></nav><p>Body 3.</p>", None),
        ("<p>Body 1.</p><div role='navigation'><p>Related 2.</p></div>", None),
        ("<table><tr><td><h2>Cell 1.</h2></td></tr></table><nav>Menu</nav><h1>Title 2.</h1><p>Body 3.</p>", "Menu"),
    ],
    ids=[
        "a nav around the page",
        "a navigation role around the page",
        "a nav holding a heading",
        "no heading",
        "a heading in a cell",
    ],
)
def test_a_menu_is_left_out_only_when_it_holds_no_heading_and_ends_before_the_first(
    tmp_path: Path, body: str, left_out: str | None
) -> None:
    """What docling's furniture rule took for the page's top: before its first heading outside cells
    and list items; a navigation element holding headings wraps content, not a menu."""
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{body}</body></html>", "utf-8")
    text = page_text(page)
    assert_in_order(_SENTENCE.findall(re.sub(r"<[^>]+>", " ", body)), text)
    if left_out:
        assert left_out not in text


def test_a_page_that_loses_text_in_conversion_is_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """The check after conversion, on a converter that drops a paragraph on purpose."""
    from docling.datamodel.base_models import InputFormat

    class Dropping(HTMLBackend):
        def _handle_block(self, tag: Any, doc: Any) -> list[Any]:
            return [] if tag.get("class") == ["dropped"] else super()._handle_block(tag, doc)

    kept = "<p>A paragraph that stays in the document, with a few words.</p>" * 20
    dropped = "<p class='dropped'>" + "This paragraph goes missing on the way. " * 8 + "</p>"
    page = f"<html><body><h1>Report</h1>{kept}{dropped}</body></html>".encode()
    note = r"2\d\d of the 1,\d{3} letters and digits of its text are not in the converted document .*"
    with caplog.at_level(logging.WARNING, GUARD):
        _docling.run_backend(Source(page, "report.html"), InputFormat.HTML, Dropping, "html", OPTIONS)
    (record,) = caplog.records
    assert re.fullmatch(r"report\.html: " + note, record.message)
    # As `add` converts it (in a worker whose log its parent keeps at DEBUG): a warning of the file,
    # which the add's report shows, and nothing logged.
    caplog.clear()
    with caplog.at_level(logging.WARNING, GUARD):
        converted = convert_checked(Source(page, "report.html"), InputFormat.HTML, Dropping, "html", "html", OPTIONS)
    (warning,) = converted.warnings
    assert re.fullmatch(note, warning)
    assert not caplog.records


def test_the_check_flags_what_doclings_own_backend_drops_and_nothing_of_ours() -> None:
    """docling's backend on libffi's page loses ~250 letters (two paragraphs and two lead-ins); the
    sample knowledge base's pages and libffi's, converted as `add` does, raise no warning."""
    from bs4 import BeautifulSoup
    from docling.backend.html_backend import HTMLDocumentBackend
    from docling.datamodel.base_models import InputFormat

    data = (DATA / "libffi-closure-api.html").read_bytes()
    theirs = _docling.run_backend(Source(data, "libffi.html"), InputFormat.HTML, HTMLDocumentBackend, "html")
    missing, total = missing_letters(BeautifulSoup(data, "html.parser").body.get_text(), theirs)  # type: ignore[union-attr]
    assert missing > max(200, 0.02 * total)
    for page in [DATA / "libffi-closure-api.html", *sorted(SAMPLE.glob("*.html"))]:
        assert page_text(page)
