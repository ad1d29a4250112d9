"""Files -> DoclingDocument.

Markdown, HTML and DOCX go through docling's own format backends (offline, no
models); PDF through our text-layer reader (pdf.py); plain text and source code
are split into paragraphs / blocks here. Everything ends up in the same model,
so items carry docling ``self_ref`` values and labels whatever the format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from docling_core.types.doc import DocItemLabel, DoclingDocument

from mcp_analysis.errors import IngestError, UnsupportedFormatError

MARKDOWN = {".md", ".markdown", ".mdx"}
HTML = {".html", ".htm", ".xhtml"}
DOCX = {".docx"}
PDF = {".pdf"}
TEXT = {".txt", ".text", ".rst", ".log", ".csv", ".tsv", ".org", ".adoc"}
CODE = {
    ".py",
    ".pyi",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".tsx",
    ".jsx",
    ".java",
    ".kt",
    ".scala",
    ".go",
    ".rs",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".cs",
    ".rb",
    ".php",
    ".swift",
    ".m",
    ".sh",
    ".bash",
    ".zsh",
    ".ps1",
    ".sql",
    ".r",
    ".jl",
    ".lua",
    ".pl",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".xml",
    ".css",
    ".scss",
    ".proto",
    ".graphql",
    ".tf",
    ".dockerfile",
    ".makefile",
}
SPECIAL_CODE_NAMES = {"dockerfile", "makefile", "justfile"}


@dataclass
class Converted:
    document: DoclingDocument
    format: str


def detect_format(path: Path) -> str:
    """The reader for `path`: by extension; a file without one (README, LICENSE) is text if its content is."""
    suffix = path.suffix.lower()
    for name, suffixes in (
        ("markdown", MARKDOWN),
        ("html", HTML),
        ("docx", DOCX),
        ("pdf", PDF),
        ("text", TEXT),
        ("code", CODE),
    ):
        if suffix in suffixes:
            return name
    if path.name.lower() in SPECIAL_CODE_NAMES:
        return "code"
    if not suffix:
        if _looks_like_text(path):
            return "text"
        raise UnsupportedFormatError(f"{path}: no file extension, and the content is not text")
    raise UnsupportedFormatError(
        f"{path}: unsupported file type '{suffix}' (supported: .md .html .pdf .docx .txt and source files)"
    )


def _looks_like_text(path: Path, sniff_bytes: int = 8192) -> bool:
    """Text if the first few KB have no NUL byte and decode as UTF-8 (or are printable cp1252/latin-1)."""
    with path.open("rb") as handle:
        head = handle.read(sniff_bytes)
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3 and len(head) == sniff_bytes:  # a character cut at the sniff boundary
            return True
    controls = sum(1 for byte in head if byte < 32 and byte not in b"\t\n\r\f")
    return controls <= len(head) // 100


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise IngestError(f"{path}: looks like a binary file, not text")
    for encoding in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise IngestError(f"{path}: cannot decode text")  # pragma: no cover - latin-1 never fails


def _docling_backend(path: Path, fmt: str) -> DoclingDocument:
    """Markdown, HTML or DOCX through docling's format backend and its SimplePipeline.

    That is what docling's `DocumentConverter` runs for these formats, minus the converter
    itself, which imports every pipeline (torch among them) and so cannot load with the
    docling-slim extras we install. The pipeline also releases the backend's file.
    """
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument
    from docling.datamodel.pipeline_options import ConvertPipelineOptions
    from docling.pipeline.simple_pipeline import SimplePipeline

    if fmt == "markdown":
        from docling.backend.md_backend import MarkdownDocumentBackend as backend

        input_format = InputFormat.MD
    elif fmt == "html":
        from docling.backend.html_backend import HTMLDocumentBackend as backend  # type: ignore[assignment]

        input_format = InputFormat.HTML
    else:
        from docling.backend.msword_backend import MsWordDocumentBackend as backend  # type: ignore[assignment]

        input_format = InputFormat.DOCX
    try:
        source = InputDocument(path_or_stream=path, format=input_format, backend=backend)
        if not source.valid:
            raise IngestError(f"{path}: docling could not open this {fmt} file")
        result = SimplePipeline(ConvertPipelineOptions()).execute(source, raises_on_error=True)
    except IngestError:
        raise
    except Exception as exc:
        cause = exc.__cause__ or exc  # the pipeline wraps the backend's error
        raise IngestError(f"{path}: could not parse {fmt}: {cause}") from exc
    return result.document


def _text_document(path: Path, text: str) -> DoclingDocument:
    """Plain text: blank-line separated paragraphs; a short first line on its own is the title."""
    doc = DoclingDocument(name=path.stem)
    blocks = [b.strip() for b in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if b.strip()]
    if len(blocks) > 1 and "\n" not in blocks[0] and len(blocks[0]) <= 150 and path.suffix.lower() != ".csv":
        doc.add_title(text=blocks.pop(0))
    for block in blocks:
        doc.add_text(label=DocItemLabel.TEXT, text=block)
    return doc


def _code_document(path: Path, text: str) -> DoclingDocument:
    """Source code: blank-line separated blocks as code items (keeps indentation)."""
    doc = DoclingDocument(name=path.name)
    doc.add_title(text=path.name)
    block: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip() and block:
            doc.add_code(text="\n".join(block))
            block = []
        elif line.strip() or block:
            block.append(line)
    if block:
        doc.add_code(text="\n".join(block))
    return doc


def convert_file(path: Path) -> Converted:
    """Parse one file into a DoclingDocument (raises IngestError / UnsupportedFormatError)."""
    fmt = detect_format(path)
    if fmt in ("markdown", "html", "docx"):
        return Converted(_docling_backend(path, fmt), fmt)
    if fmt == "pdf":
        from mcp_analysis.ingest.pdf import pdf_to_docling

        return Converted(pdf_to_docling(path, path.stem), fmt)
    text = _read_text(path)
    if fmt == "code":
        return Converted(_code_document(path, text), fmt)
    return Converted(_text_document(path, text), fmt)
