"""E-books (.epub) through docling's EPUB backend: chapters in spine order, as HTML.

The backend bounds what it reads from the archive (per member and in total) and
refuses unsafe member paths; images are not fetched.
"""

from __future__ import annotations

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source
from mcp_analysis.ingest.formats.office import check_unpacked


def convert(source: Source) -> Converted:
    from docling.backend.epub_backend import EpubDocumentBackend
    from docling.datamodel.backend_options import EpubBackendOptions
    from docling.datamodel.base_models import InputFormat

    check_unpacked(source)
    options = EpubBackendOptions(fetch_images=False)
    return Converted(run_backend(source, InputFormat.EPUB, EpubDocumentBackend, "e-book", options), "epub")
