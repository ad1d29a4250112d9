"""Converters by file suffix: one module per format family, each `convert(source) -> Converted`.

The contract is in base.py. This registry is imported by processes that never parse (the ingest
pipeline only picks the format and sniffs the first bytes; conversion happens in the worker
processes), so a format module imports its parser inside `convert`, or is registered by its
dotted name and imported on first use. Adding a format is a module here and one `register(...)`
line below.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from mcp_analysis.errors import UnsupportedFormatError
from mcp_analysis.ingest.formats import docx, html, markdown, pdf, text
from mcp_analysis.ingest.formats.base import Converted, Converter, Source, looks_like_text

__all__ = ["Converted", "Converter", "Format", "Source", "find", "for_file", "register", "supported"]


@dataclass(frozen=True)
class Format:
    converter: Converter | str  # the function, or the name of a module whose `convert` it is
    text: bool  # the bytes are text: a NUL byte anywhere means a binary file, refused before parsing

    def convert(self, source: Source) -> Converted:
        if isinstance(self.converter, str):
            return importlib.import_module(self.converter).convert(source)  # type: ignore[no-any-return]
        return self.converter(source)


_BY_SUFFIX: dict[str, Format] = {}
_BY_NAME: dict[str, Format] = {}


def register(
    suffixes: Iterable[str], convert: Converter | str, *, text: bool = False, names: Iterable[str] = ()
) -> None:
    """Files ending in one of `suffixes` (".md", any case), or called one of `names`, go to `convert`:
    a function, or the dotted name of a module with a `convert` function, imported on first use
    (so a module importing heavy readers at its top costs nothing until a file of its kind comes)."""
    entry = Format(convert, text)
    for suffix in suffixes:
        _BY_SUFFIX[suffix.lower()] = entry
    for name in names:
        _BY_NAME[name.lower()] = entry


def find(name: str) -> Format | None:
    """The format of a file called `name`, by its suffix or its whole name (None if unknown)."""
    path = PurePath(name)
    return _BY_SUFFIX.get(path.suffix.lower()) or _BY_NAME.get(path.name.lower())


def for_file(name: str, head: bytes) -> Format:
    """The format of a file called `name` whose first bytes are `head`; a file without a suffix
    (README, LICENSE) is text when its first bytes are."""
    found = find(name)
    if found is not None:
        return found
    suffix = PurePath(name).suffix.lower()
    if not suffix:
        if looks_like_text(head):
            return _BY_SUFFIX[".txt"]
        raise UnsupportedFormatError("no file extension, and the content is not text")
    raise UnsupportedFormatError(f"unsupported file type '{suffix}' (supported: {supported()})")


def supported() -> str:
    """The suffixes, for messages: the document formats (in registration order), then text and code."""
    plain = {text.convert_text, text.convert_code}
    return " ".join(s for s, f in _BY_SUFFIX.items() if f.converter not in plain) + " .txt and source files"


register(markdown.SUFFIXES, markdown.convert, text=True)
register(html.SUFFIXES, html.convert, text=True)
register(docx.SUFFIXES, docx.convert)
register(pdf.SUFFIXES, pdf.convert)
register(text.TEXT_SUFFIXES, text.convert_text, text=True)
register(text.CODE_SUFFIXES, text.convert_code, text=True, names=text.CODE_NAMES)
