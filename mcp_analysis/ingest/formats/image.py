"""Images (.png .jpg .jpeg .tif .tiff .bmp .webp) -> text by OCR, one page per frame.

A multi-page TIFF is one page per frame. A page with no recognisable text is one warning
line; a file with none at all is refused with that reason. With `ingest.ocr = off`,
images are not read (refused by name, so the ingest says so).
"""

from __future__ import annotations

import io

from docling_core.types.doc import BoundingBox, DocItemLabel, DoclingDocument, ProvenanceItem, Size

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, check_items
from mcp_analysis.ingest.formats.ocr import MAX_PIXELS, paragraphs, recognise

SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp")


def convert(source: Source) -> Converted:
    if source.limits.ocr == "off":
        raise IngestError("an image is read by OCR, which is off (ingest.ocr = off)")
    from PIL import Image, ImageSequence, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = 4 * MAX_PIXELS  # refuse decompression bombs; big scans are scaled down later
    try:
        image = Image.open(io.BytesIO(source.data))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise IngestError(f"not a readable image ({exc})") from None
    doc = DoclingDocument(name=source.stem)
    result = Converted(doc, "image")
    for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
        check_items(source, number, "pages (frames)")
        doc.add_page(page_no=number, size=Size(width=frame.width, height=frame.height))
        lines = recognise(frame)
        if not lines:
            result.warnings.append(f"page {number}: no recognisable text")
            continue
        result.ocr_pages.append(number)
        for line_block in paragraphs(lines):
            box = BoundingBox(l=0, t=0, r=frame.width, b=frame.height)
            prov = ProvenanceItem(page_no=number, bbox=box, charspan=(0, len(line_block)))
            doc.add_text(label=DocItemLabel.TEXT, text=line_block, prov=prov)
    if not result.ocr_pages:
        raise IngestError("no recognisable text in the image (OCR found none)")
    return result
