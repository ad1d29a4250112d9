"""The `ingest` settings and the per-file bounds every file is converted under.

Kept free of other mcp_analysis imports (pydantic only): config.py attaches `IngestSettings`
as the `ingest` section, and the conversion worker receives `Limits` (a plain frozen dataclass
that pickles cheaply) with every file. Each bound names the setting that raises it, so a
refusal can say what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one file may cost to convert; defaults are those of `IngestSettings`."""

    max_bytes: int = 100 * MB
    max_seconds: float = 120.0
    max_memory_mb: int = 2048
    max_items: int = 100_000
    max_depth: int = 256
    max_unpacked_bytes: int = 512 * MB
    max_table_cells: int = 20_000_000  # all tables of one file together (a sheet's rows are kept as text)
    max_table_chunks: int = 200  # chunks one table becomes at most: its rows are grouped to fit
    max_table_chars: int = 32_000_000  # characters of CSV one table keeps (its first rows beyond)
    ocr: Literal["auto", "off"] = "auto"  # images and PDF pages without a text layer: OCR costs seconds a page


# The setting behind each bound, for messages ("raise ingest.max_items").
SETTING = {
    "max_bytes": "ingest.max_file_mb",
    "max_seconds": "ingest.max_seconds_per_file",
    "max_memory_mb": "ingest.max_memory_mb",
    "max_items": "ingest.max_items",
    "max_depth": "ingest.max_depth",
    "max_unpacked_bytes": "ingest.max_unpacked_mb",
    "max_table_cells": "ingest.max_table_cells",
    "max_table_chars": "ingest.max_table_chars",
}

_DEFAULT = Limits()


class IngestSettings(BaseModel):
    """The `ingest` section: chunking, batching, and the bounds of each file."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    chunk_tokens: int = Field(256, ge=32, le=2048, description="Target chunk size in embedder tokens.")
    batch_documents: int = Field(32, ge=1, le=10_000, description="Documents written per atomic batch.")
    max_file_mb: float = Field(
        _DEFAULT.max_bytes / MB, gt=0, description="Larger files are refused before they are read, in MB."
    )
    max_seconds_per_file: float = Field(
        _DEFAULT.max_seconds, gt=0, description="Wall-clock seconds to read and convert one file."
    )
    max_memory_mb: int = Field(
        _DEFAULT.max_memory_mb,
        ge=256,
        description="Memory one file's conversion may take (the conversion worker's address space beyond its "
        "baseline), in MB.",
    )
    max_items: int = Field(
        _DEFAULT.max_items, ge=10, description="Paragraphs, table cells, list items... one document may have."
    )
    max_depth: int = Field(
        _DEFAULT.max_depth, ge=8, le=100_000, description="Nesting depth of a document's elements (HTML, XML)."
    )
    max_unpacked_mb: float = Field(
        _DEFAULT.max_unpacked_bytes / MB,
        gt=0,
        description="What a packed file (DOCX and other zip-based formats) may unpack to, in MB.",
    )

    max_table_cells: int = Field(
        _DEFAULT.max_table_cells, ge=1, description="Table cells (all sheets and tables) one file may have."
    )
    max_table_chunks: int = Field(
        _DEFAULT.max_table_chunks,
        ge=1,
        le=100_000,
        description="Chunks one table becomes at most (its rows are grouped to fit, each group with the header row).",
    )
    max_table_chars: int = Field(
        _DEFAULT.max_table_chars,
        ge=1000,
        description="Characters of CSV one table keeps (tables/{n}.csv): a larger table keeps its first rows, "
        "with a warning.",
    )
    ocr: Literal["auto", "off"] = Field(
        _DEFAULT.ocr,
        description="auto: read images and PDF pages without a text layer by OCR (offline); off: skip them.",
    )

    def limits(self) -> Limits:
        return Limits(
            max_bytes=int(self.max_file_mb * MB),
            max_seconds=self.max_seconds_per_file,
            max_memory_mb=self.max_memory_mb,
            max_items=self.max_items,
            max_depth=self.max_depth,
            max_unpacked_bytes=int(self.max_unpacked_mb * MB),
            max_table_cells=self.max_table_cells,
            max_table_chunks=self.max_table_chunks,
            max_table_chars=self.max_table_chars,
            ocr=self.ocr,
        )
