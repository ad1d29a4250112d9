"""Plain text and source code: paragraphs / blank-line separated blocks, in the docling model."""

from __future__ import annotations

import re

from mcp_analysis.ingest.formats.base import Converted, Source, check_items, decode_text

TEXT_SUFFIXES = (".txt", ".text", ".rst", ".log", ".csv", ".tsv", ".org", ".adoc")
CODE_SUFFIXES = (
    *(".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".scala", ".go", ".rs"),
    *(".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".m", ".sh", ".bash", ".zsh"),
    *(".ps1", ".sql", ".r", ".jl", ".lua", ".pl", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg"),
    *(".xml", ".css", ".scss", ".proto", ".graphql", ".tf", ".dockerfile", ".makefile"),
)
CODE_NAMES = ("dockerfile", "makefile", "justfile")

_BLANK_LINES = re.compile(r"\n\s*\n")


def convert_text(source: Source) -> Converted:
    """Blank-line separated paragraphs; a short first line on its own is the title."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    text = decode_text(source.data).replace("\r\n", "\n")
    blocks = [b.strip() for b in _BLANK_LINES.split(text) if b.strip()]
    check_items(source, len(blocks), "paragraphs")
    doc = DoclingDocument(name=source.stem)
    if len(blocks) > 1 and "\n" not in blocks[0] and len(blocks[0]) <= 150 and source.suffix != ".csv":
        doc.add_title(text=blocks.pop(0))
    for block in blocks:
        doc.add_text(label=DocItemLabel.TEXT, text=block)
    return Converted(doc, "text")


def convert_code(source: Source) -> Converted:
    """Blank-line separated blocks as code items (indentation kept), under the file name as title."""
    from docling_core.types.doc import DoclingDocument

    text = decode_text(source.data).replace("\r\n", "\n")
    blocks: list[str] = []
    block: list[str] = []
    for line in text.split("\n"):
        if not line.strip() and block:
            blocks.append("\n".join(block))
            block = []
            check_items(source, len(blocks), "code blocks")
        elif line.strip() or block:
            block.append(line)
    if block:
        blocks.append("\n".join(block))
    check_items(source, len(blocks), "code blocks")
    doc = DoclingDocument(name=source.name)
    doc.add_title(text=source.name)
    for code in blocks:
        doc.add_code(text=code)
    return Converted(doc, "code")
