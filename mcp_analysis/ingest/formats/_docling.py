"""docling's own format backends and its SimplePipeline, run on bytes.

That is what docling's `DocumentConverter` runs for Markdown, HTML and DOCX, minus the converter
itself, which imports every pipeline (torch among them) and so cannot load with the docling-slim
extras we install.
"""

from __future__ import annotations

from io import BytesIO
from typing import TYPE_CHECKING, Any

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Source

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument


def run_backend(source: Source, input_format: Any, backend: type, label: str, options: Any = None) -> DoclingDocument:
    """`source.data` through `backend` (a docling DeclarativeDocumentBackend class, with its `options`)."""
    from docling.datamodel.document import InputDocument
    from docling.datamodel.pipeline_options import ConvertPipelineOptions
    from docling.pipeline.simple_pipeline import SimplePipeline

    try:
        document = InputDocument(
            path_or_stream=BytesIO(source.data),
            format=input_format,
            backend=backend,
            filename=source.name,
            backend_options=options,
        )
        if not document.valid:
            raise IngestError(f"docling could not open this {label} file")
        result = SimplePipeline(ConvertPipelineOptions()).execute(document, raises_on_error=True)
    except IngestError:
        raise
    except Exception as exc:
        cause = exc.__cause__ or exc  # the pipeline wraps the backend's error
        if isinstance(cause, RecursionError):
            raise IngestError(f"the {label} nests too deeply for its parser (Python's recursion limit)") from exc
        raise IngestError(f"could not parse {label}: {cause}") from exc
    return result.document
