"""Converters by file suffix: one module per format family, each `convert(source) -> Converted`.

The contract is in base.py. This registry maps suffixes to converter modules by name: a module
(and the parser it uses) is imported the first time a file of its kind is converted, which
happens in a conversion worker process; the ingest pipeline imports this registry only to pick
a format and sniff the first bytes. Adding a format is a module here and one `register(...)`
line at the bottom.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from mcp_analysis.errors import UnsupportedFormatError
from mcp_analysis.ingest.formats.base import Converted, Converter, Source, TableRows, looks_like_text

__all__ = ["Converted", "Converter", "Format", "Source", "TableRows", "find", "for_file", "register", "supported"]


@dataclass(frozen=True)
class Format:
    converter: Converter | str  # a function, or the dotted name of a module whose `convert` it is
    text: bool  # the bytes are text: a NUL byte anywhere means a binary file, refused before parsing

    def convert(self, source: Source) -> Converted:
        if isinstance(self.converter, str):
            return importlib.import_module(self.converter).convert(source)  # type: ignore[no-any-return]
        return self.converter(source)


_BY_SUFFIX: dict[str, Format] = {}
_BY_NAME: dict[str, Format] = {}
_PLAIN = (f"{__name__}.text", f"{__name__}.code")  # named as a whole in messages, not suffix by suffix


def register(
    suffixes: Iterable[str], convert: Converter | str, *, text: bool = False, names: Iterable[str] = ()
) -> None:
    """Files ending in one of `suffixes` (".md", any case), or called one of `names`, go to `convert`:
    a function, or the dotted name of a module with a `convert` function, imported on first use."""
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
    return " ".join(s for s, f in _BY_SUFFIX.items() if f.converter not in _PLAIN) + " .txt and source files"


register((".md", ".markdown", ".mdx"), f"{__name__}.markdown", text=True)
register((".html", ".htm", ".xhtml"), f"{__name__}.html", text=True)
register((".docx",), f"{__name__}.docx")
register((".pdf",), f"{__name__}.pdf")
register((".xlsx", ".xlsm", ".xls", ".ods"), f"{__name__}.spreadsheet")
register((".csv", ".tsv"), f"{__name__}.delimited", text=True)
register((".pptx",), f"{__name__}.slides")
register((".odt", ".odp"), f"{__name__}.odf")
register((".epub",), f"{__name__}.epub")
register((".eml",), f"{__name__}.email")
register((".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"), f"{__name__}.image")
register((".txt", ".text", ".rst", ".log", ".org", ".adoc"), f"{__name__}.text", text=True)
register(
    (
        *(".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".scala", ".go", ".rs"),
        *(".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".m", ".sh", ".bash", ".zsh"),
        *(".ps1", ".sql", ".r", ".jl", ".lua", ".pl", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg"),
        *(".xml", ".css", ".scss", ".proto", ".graphql", ".tf", ".dockerfile", ".makefile"),
    ),
    f"{__name__}.code",
    text=True,
    names=("dockerfile", "makefile", "justfile"),
)
