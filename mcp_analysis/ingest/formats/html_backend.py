"""docling's HTML backend, made to keep the text it drops around nested lists and in sections.

docling reads a list item (`<li>`, `<dt>`, `<dd>`) as one text, everything but its nested lists
and tables, followed by those: text after a nested list moved before it. Worse, a `<dd>` holding
a `<dl>` of its own (Texinfo's nested tables: every function's argument list) lost all its
other text, a `<dt>` lost its nested lists, and a `<dl>` lost whatever sits beside its
`<dt>`/`<dd>` elements. This subclass reads an item's text up to its first nested list or table
only, and emits what follows each of them in its place, under the item. It also keeps the text
docling marks as page furniture while a reader sees it as content: everything before the first
heading (`infer_furniture`: an introduction, a page without headings up top), and a `<footer>`
that closes an article, a section or a quote rather than the page. What that rule was for, the
page's menus, is left out by name: a `<nav>` (or `role="navigation"`) before the first heading.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from io import BytesIO
from typing import TYPE_CHECKING, Any

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import PreformattedString
from docling.backend.html_backend import AnnotatedTextList, HTMLDocumentBackend
from docling.datamodel.backend_options import HTMLBackendOptions

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source

if TYPE_CHECKING:
    from bs4.element import PageElement
    from docling_core.types.doc import DoclingDocument, RefItem

log = logging.getLogger(__name__)

OPTIONS = HTMLBackendOptions(infer_furniture=False)
# Where a conversion collects the check's notes (lost_text_notes); unset, the check logs them.
_NOTES: ContextVar[list[str] | None] = ContextVar("html_lost_text_notes", default=None)
# The check after conversion: a warning when more letters and digits of the page's text than
# this (and than this share of them) are missing from the document.
MISSING_LETTERS = 200
MISSING_SHARE = 0.02
_NOT_LETTERS = re.compile(r"[\W_]+")

_BREAKS = ("ul", "ol", "dl", "table")  # what docling lifts out of a list item's text
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# A <footer> belongs to its nearest sectioning element: only the body's is the page's footer.
_SECTIONING = ("article", "aside", "nav", "section", "blockquote", "details", "dialog", "fieldset", "figure", "td")


def _has_text(node: PageElement) -> bool:
    """Whether `node` shows text (a comment, a CDATA section does not)."""
    if isinstance(node, Tag):
        return bool(node.get_text(strip=True))
    return isinstance(node, NavigableString) and not isinstance(node, PreformattedString) and bool(node.strip())


def _holds_break(node: PageElement) -> bool:
    return isinstance(node, Tag) and (node.name in _BREAKS or node.find(_BREAKS) is not None)


def _reshape(soup: BeautifulSoup, first_heading: Tag | None) -> None:
    """Rewrite the shapes docling reads text out of into equivalent ones it reads whole."""
    for dl in soup.find_all("dl"):
        _wrap_loose_children(soup, dl)
    for dd in soup.find_all("dd"):
        nested = dd.find_all("dl", recursive=False)
        # docling emits only the nested lists of a <dd> with a <dl> child, and those only under a term
        # before it: wrapped, the <dd> is a plain item.
        others = any(_has_text(child) for child in dd.children if getattr(child, "name", None) != "dl")
        if nested and (others or dd.find_previous_sibling("dt") is None):
            for dl in nested:
                dl.wrap(soup.new_tag("div"))
    for footer in soup.find_all("footer"):
        if footer.find_parent(_SECTIONING) is not None:
            footer.name = "div"
    for menu in _menus_before(soup, first_heading):
        menu.decompose()


def _menus_before(soup: BeautifulSoup, first_heading: Tag | None) -> list[Tag]:
    """The page's navigation (`<nav>`, `role="navigation"`) that ends before `first_heading` (what
    docling's furniture rule took for the page's top; none on a page without one) and holds no
    heading itself: a menu, never a wrapper around the page's content."""
    if first_heading is None:
        return []
    menus = []
    for tag in soup.descendants:
        if tag is first_heading:
            break
        if not isinstance(tag, Tag) or not (tag.name == "nav" or tag.get("role") == "navigation"):
            continue
        if tag.find_parent(_SECTIONING) is None and tag.find(_HEADINGS) is None:
            menus.append(tag)
    return menus


def _wrap_loose_children(soup: BeautifulSoup, dl: Tag) -> None:
    """Put each run of text or other elements beside a <dl>'s <dt>/<dd>/<div> children in a <dd>."""
    run: list[PageElement] = []
    for child in [*dl.children, None]:
        if child is not None and not (isinstance(child, Tag) and child.name in ("dt", "dd", "div")):
            run.append(child)
            continue
        if any(_has_text(node) for node in run):
            holder = soup.new_tag("dd")
            run[0].insert_before(holder)
            for node in run:
                holder.append(node.extract())
        run = []
        if isinstance(child, Tag) and child.name == "div":
            _wrap_loose_children(soup, child)


def add_note(file_name: str, note: str) -> None:
    """A warning of the file being converted: the file's (the add's report, its metadata) inside
    `lost_text_notes`, logged outside it."""
    notes = _NOTES.get()
    if notes is None:
        log.warning("%s: %s", file_name, note)
    else:
        notes.append(note)


@contextlib.contextmanager
def lost_text_notes() -> Iterator[list[str]]:
    """The check's notes of the conversions run inside, for the file's warnings: a conversion worker's
    log reaches its parent at DEBUG only, a warning reaches the add's report."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def convert_checked(
    source: Source, input_format: Any, backend: type, label: str, kind: str, options: Any = None
) -> Converted:
    """`run_backend`'s document, with the lost-text check's notes (of each page it converted) as warnings."""
    with lost_text_notes() as notes:
        document = run_backend(source, input_format, backend, label, options)
    return Converted(document, kind, warnings=notes)


def convert_embedded(
    stream: BytesIO, name: str, backend: type[HTMLBackend] | None = None, **extra: Any
) -> DoclingDocument:
    """HTML that another file holds (an e-book's chapters, a Markdown file's HTML blocks) through
    `backend` (ours by default): nothing fetched, no title added, no furniture inferred, as docling's
    own EPUB and Markdown backends read it."""
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument

    backend = backend or HTMLBackend
    options = HTMLBackendOptions(fetch_images=False, infer_furniture=False, add_title=False)
    document = InputDocument(stream, InputFormat.HTML, backend, filename=name, backend_options=options)
    return backend(document, path_or_stream=stream, options=options, **extra).convert()


def missing_letters(text: str, doc: DoclingDocument) -> tuple[int, int]:
    """How many letters and digits of `text` no text of `doc` (any layer, table cells too) has, of how many."""
    source = Counter(_NOT_LETTERS.sub("", text))
    found: Counter[str] = Counter()
    for item in doc.texts:
        found.update(_NOT_LETTERS.sub("", item.text))
    for table in doc.tables:
        for cell in table.data.table_cells:
            found.update(_NOT_LETTERS.sub("", cell.text))
    return sum((source - found).values()), sum(source.values())


class HTMLBackend(HTMLDocumentBackend):
    """HTMLDocumentBackend keeping each list item's text in document order (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading_item: bool = False  # reading a list item's own text: stop at its first break
        self._past_break: bool = False
        self._items_past_break: set[int] = set()  # ids of the list items whose first break was emitted
        self._reshaped = False

    def _walk(self, element: Tag, doc: DoclingDocument, skip_tags: frozenset[str] = frozenset()) -> list[RefItem]:
        if not self._reshaped and self.soup is not None:
            # convert()'s walk of the page, after its repairs (implied end tags, blocks inside <p>)
            self._reshaped = True
            headings = (h for h in self.soup.find_all(_HEADINGS) if not self._is_header_in_cell_or_item(h))
            _reshape(self.soup, next(headings, None))
        return super()._walk(element, doc, skip_tags)

    def convert(self) -> DoclingDocument:
        doc = super().convert()
        if self.soup is not None:  # what convert() left of it: no scripts, no hidden elements
            missing, total = missing_letters((self.soup.body or self.soup).get_text(), doc)
            if missing > max(MISSING_LETTERS, MISSING_SHARE * total):
                note = (
                    f"{missing:,} of the {total:,} letters and digits of its text are not in the converted "
                    "document (a shape of HTML the converter does not read)"
                )
                add_note(self.file.name, note)
        return doc

    def _extract_text_and_hyperlink_recursively(
        self,
        item: PageElement,
        ignore_list: bool = False,
        find_parent_annotation: bool = False,
        keep_newlines: bool = False,
    ) -> AnnotatedTextList:
        if self._reading_item and ignore_list:
            if isinstance(item, Tag) and item.name in _BREAKS:
                self._past_break = True
            if self._past_break:
                return AnnotatedTextList()
        return super()._extract_text_and_hyperlink_recursively(item, ignore_list, find_parent_annotation, keep_newlines)

    def _add_list_item_with_content(
        self, tag: Tag, doc: DoclingDocument, parent: RefItem, enumerated: bool = False, marker: str = "", **extra: Any
    ) -> RefItem | None:
        self._reading_item, self._past_break = True, False
        try:
            item = super()._add_list_item_with_content(tag, doc, parent, enumerated, marker, **extra)
            cut = self._past_break
        finally:
            self._reading_item = False
        if item is None and cut and self._text_after_break(tag):
            # The item's text all follows a nested list: an empty item holds it, as docling's own
            # items without text hold their table or image.
            prov = self._make_text_prov(text="", tag=tag)
            layer = self.content_layer
            item = doc.add_list_item(
                text="", enumerated=enumerated, marker=marker, parent=parent, content_layer=layer, prov=prov
            )
        if tag.name == "dt" and tag.find(_BREAKS) is not None:  # docling emits nothing nested in a term
            with self._use_list_item_context(item or parent):
                self._process_list_item_nested_content(tag, doc, set())
        return item

    def _text_after_break(self, tag: Tag) -> bool:
        parts = super()._extract_text_and_hyperlink_recursively(tag, ignore_list=True)
        return any(part.text.strip() for part in parts)

    def _process_nested_element(
        self, elem: PageElement, li: Tag, doc: DoclingDocument, processed_elements: set[int]
    ) -> None:
        """As docling does, and past the item's first nested list or table, its text too, in place."""
        if id(elem) in processed_elements:
            return
        if id(li) in self._items_past_break and not _holds_break(elem):
            processed_elements.add(id(elem))
            self._walk_nodes(li, [elem], doc)
            return
        super()._process_nested_element(elem, li, doc, processed_elements)
        if isinstance(elem, Tag) and elem.name in _BREAKS:
            self._items_past_break.add(id(li))
