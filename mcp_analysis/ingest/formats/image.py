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
from mcp_analysis.ingest.formats.ocr import MAX_PIXELS, OcrBudget, paragraphs, recognise

MAX_DECODED_PIXELS = 4 * MAX_PIXELS


def convert(source: Source) -> Converted:
    if source.limits.ocr == "off":
        raise IngestError("an image is read by OCR, which is off (ingest.ocr = off)")
    from PIL import Image, ImageSequence, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_DECODED_PIXELS  # Pillow's own guard, for every image this process opens
    try:
        image = Image.open(io.BytesIO(source.data))
        _check_size(image.width, image.height)
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise IngestError(f"not a readable image ({exc})") from None
    doc = DoclingDocument(name=source.stem)
    result = Converted(doc, "image")
    budget = OcrBudget(source.limits.max_seconds)
    for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
        check_items(source, number, "pages (frames)")
        _check_size(frame.width, frame.height)
        doc.add_page(page_no=number, size=Size(width=frame.width, height=frame.height))
        if not budget.allows(number):
            continue
        lines = recognise(frame)
        if not lines:
            result.warnings.append(f"page {number}: no recognisable text")
            continue
        result.ocr_pages.append(number)
        for line_block in paragraphs(lines):
            box = BoundingBox(l=0, t=0, r=frame.width, b=frame.height)
            prov = ProvenanceItem(page_no=number, bbox=box, charspan=(0, len(line_block)))
            doc.add_text(label=DocItemLabel.TEXT, text=line_block, prov=prov)
    if (left_out := budget.warning()) is not None:
        result.warnings.append(left_out)
    if not result.ocr_pages:
        raise IngestError("no recognisable text in the image (OCR found none)")
    return result


def _check_size(width: int, height: int) -> None:
    """Refuse, from the header and before decoding, an image too large to read: a few KB of PNG
    can declare 20,000 x 20,000 px (gigabytes once decoded). Scans up to MAX_DECODED_PIXELS
    (a 300 dpi A0 poster is ~140 MP) are decoded, then scaled down for OCR."""
    if width * height > MAX_DECODED_PIXELS:
        raise IngestError(
            f"the image is {width:,} x {height:,} px ({width * height / 1e6:,.0f} megapixels), over the "
            f"{MAX_DECODED_PIXELS / 1e6:,.0f} megapixels OCR reads; save it at a lower resolution"
        )
