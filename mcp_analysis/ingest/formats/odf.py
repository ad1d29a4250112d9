"""OpenDocument text and presentations (.odt .odp) through docling's ODF backend (odfdo).

A presentation's slides are numbered as pages: each slide starts with its title item,
and the items after it carry that slide's number. Spreadsheets (.ods) go through
spreadsheet.py, which reads every row.
"""

from __future__ import annotations

from docling_core.types.doc import BoundingBox, DocItem, DoclingDocument, ProvenanceItem, Size

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source
from mcp_analysis.ingest.formats.office import check_unpacked, encrypted_message, is_encrypted_odf


def convert(source: Source) -> Converted:
    from docling.backend.opendocument_backend import OdpDocumentBackend, OdtDocumentBackend
    from docling.datamodel.base_models import InputFormat

    presentation = source.name.lower().endswith(".odp")
    kind = "presentation" if presentation else "text document"
    if is_encrypted_odf(source.data):
        raise IngestError(encrypted_message(kind))
    check_unpacked(source)
    if presentation:
        doc = run_backend(source, InputFormat.ODP, OdpDocumentBackend, kind)
        _number_slides(doc)
        return Converted(doc, "odp")
    return Converted(run_backend(source, InputFormat.ODT, OdtDocumentBackend, kind), "odt")


def _number_slides(doc: DoclingDocument) -> None:
    """Give items without a page the number of the slide (title) they follow."""
    slide = 0
    for item, _level in doc.iterate_items():
        if not isinstance(item, DocItem):
            continue
        if item.label == "title":
            slide += 1
        if slide and not item.prov:
            if slide not in doc.pages:
                doc.add_page(page_no=slide, size=Size(width=1, height=1))
            item.prov.append(ProvenanceItem(page_no=slide, bbox=BoundingBox(l=0, t=1, r=1, b=0), charspan=(0, 0)))
