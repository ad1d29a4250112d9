"""HTML through docling's HTML backend (BeautifulSoup), after a streaming check of its nesting depth.

docling walks the element tree recursively, and some of its clean-ups look up every element's
ancestors, so its cost grows with depth times size: 100,000 nested elements took minutes. The
depth is measured first with the standard library's streaming tokenizer, closing elements the
way a browser does (void elements, end tags a later start tag implies), and a document nested
deeper than `ingest.max_depth` is refused before it is parsed.
"""

from __future__ import annotations

from html.parser import HTMLParser

from mcp_analysis.ingest.formats.base import Converted, Source, check_depth

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
    | {"basefont", "bgsound", "frame", "keygen"}
)
_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figcaption", "figure"}
    | {"footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "main", "menu", "nav"}
    | {"ol", "p", "pre", "section", "table", "ul"}
)
# A start tag closes the open elements it implies an end for, unless a boundary is nearer.
_IMPLIED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol", "menu"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr", "td", "th"}), frozenset({"table", "thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "option": (frozenset({"option"}), frozenset({"select", "datalist", "optgroup"})),
    **{block: (frozenset({"p"}), frozenset({"div", "td", "th", "li", "body", "button"})) for block in _BLOCKS},
}
_SCAN_PIECE = 65536


class _TooDeep(Exception):
    pass


class _DepthScan(HTMLParser):
    def __init__(self, limit: int) -> None:
        super().__init__(convert_charrefs=False)
        self.limit = limit
        self.open: list[str] = []
        self.deepest = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        closes, boundaries = _IMPLIED.get(tag, (frozenset(), frozenset()))
        if closes:
            self._close_implied(closes, boundaries)
        if tag in _VOID:
            return
        self.open.append(tag)
        if len(self.open) > self.deepest:
            self.deepest = len(self.open)
            if self.deepest > self.limit:
                raise _TooDeep

    def _close_implied(self, closes: frozenset[str], boundaries: frozenset[str]) -> None:
        """Close the nearest open element in `closes`, again and again, until a boundary is nearer."""
        index = len(self.open) - 1
        while index >= 0:
            name = self.open[index]
            if name in boundaries:
                return
            if name in closes:
                del self.open[index:]
            index -= 1

    def handle_startendtag(self, tag: str, attrs: object) -> None:
        pass  # <x/> opens nothing

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.open) - 1, -1, -1):  # at most `limit` steps: the stack never grows past it
            if self.open[index] == tag:
                del self.open[index:]
                return


def nesting_depth(source: Source) -> int:
    """How deep the elements nest, stopping once past `max_depth` (then max_depth + 1)."""
    scan = _DepthScan(source.limits.max_depth)
    text = source.data.decode("utf-8", "replace")  # tags are ASCII whatever the charset
    try:
        for start in range(0, len(text), _SCAN_PIECE):
            scan.feed(text[start : start + _SCAN_PIECE])
        scan.close()
    except _TooDeep:
        pass
    return scan.deepest


def convert(source: Source) -> Converted:
    from docling.datamodel.base_models import InputFormat

    from mcp_analysis.ingest.formats.html_backend import OPTIONS, HTMLBackend, convert_checked

    check_depth(source, nesting_depth(source))
    return convert_checked(source, InputFormat.HTML, HTMLBackend, "html", "html", OPTIONS)
