"""Offline OCR: scans rendered from known text are read back; pages without text are reported."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.items import extract_items
from tests.format_files import SCAN_TEXT, convert_file, render_scan, words, write_scan, write_scanned_pdf


def _recall(expected: list[str], text: str) -> float:
    want, got = collections.Counter(words(" ".join(expected))), collections.Counter(words(text))
    return sum(min(n, got[w]) for w, n in want.items()) / sum(want.values())


@pytest.mark.parametrize("mode", ["L", "RGB", "P", "RGBA"])
def test_a_scanned_image_is_read_back_with_its_words_apart(tmp_path: Path, mode: str) -> None:
    path = write_scan(tmp_path / "scan.png", mode=mode)
    converted = convert_file(path)
    text = "\n".join(i.text for i in extract_items(converted.document))
    assert _recall(SCAN_TEXT, text) >= 0.9, text
    assert "hydraulic failure" in text  # words kept apart: what full-text search needs
    assert converted.ocr_pages == [1] and converted.warnings == []


def test_a_multipage_tiff_is_one_page_per_frame_and_a_blank_frame_is_reported(tmp_path: Path) -> None:
    from PIL import Image

    first = render_scan(["Berth two closes on Friday"])
    second = Image.new("L", first.size, 255)  # type: ignore[attr-defined]
    third = render_scan(["Pilot boarding moves to the north gate"])
    path = tmp_path / "fax.tiff"
    first.save(path, save_all=True, append_images=[second, third])  # type: ignore[attr-defined]
    converted = convert_file(path)
    pages = {i.text: i.page_numbers for i in extract_items(converted.document)}
    assert pages == {"Berth two closes on Friday": [1], "Pilot boarding moves to the north gate": [3]}
    assert converted.ocr_pages == [1, 3]
    assert converted.warnings == ["page 2: no recognisable text"]


def test_an_image_without_text_or_with_ocr_off_is_refused_with_the_reason(tmp_path: Path) -> None:
    from PIL import Image

    blank = tmp_path / "blank.png"
    Image.new("RGB", (800, 600), (235, 235, 235)).save(blank)
    with pytest.raises(IngestError, match="no recognisable text"):
        convert_file(blank)
    scan = write_scan(tmp_path / "scan.jpg")
    with pytest.raises(IngestError, match="OCR, which is off"):
        convert_file(scan, ocr="off")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(IngestError, match="not a readable image"):
        convert_file(broken)


def test_pdf_pages_without_a_text_layer_are_ocred_and_recorded(tmp_path: Path) -> None:
    pdf = write_scanned_pdf(tmp_path / "mixed.pdf", write_scan(tmp_path / "scan.png"))
    converted = convert_file(pdf)
    items = extract_items(converted.document)
    assert items[0].page_numbers == [1] and "real text layer" in items[0].text
    scanned = " ".join(i.text for i in items if i.page_numbers == [2])
    assert _recall(SCAN_TEXT, scanned) >= 0.9, scanned
    assert converted.ocr_pages == [2]
    assert converted.warnings == ["page 3: no text layer and no recognisable text"]
    without = convert_file(pdf, ocr="off")
    assert without.ocr_pages == [] and {p for i in extract_items(without.document) for p in i.page_numbers} == {1}
    assert without.warnings == [
        "page 2: no text layer (OCR is off: ingest.ocr)",
        "page 3: no text layer (OCR is off: ingest.ocr)",
    ]


def test_ocr_past_its_share_of_the_time_bound_keeps_the_pages_read_and_names_the_rest(tmp_path: Path) -> None:
    """A long scan keeps what OCR read in time; the pages left are one warning naming the setting."""
    from fpdf import FPDF

    scan = write_scan(tmp_path / "scan.png")
    pdf = FPDF()
    for _ in range(4):
        pdf.add_page()
        pdf.image(str(scan), x=10, y=20, w=190)
    pdf.output(str(tmp_path / "scans.pdf"))
    converted = convert_file(tmp_path / "scans.pdf", max_seconds=0.001)  # spent once the first page is read
    assert converted.ocr_pages == [1]
    assert converted.warnings == [
        "3 pages (2-4) not read by OCR: it had used its share of the 0.001 s per file "
        "(raise ingest.max_seconds_per_file to read them)"
    ]
    scanned = " ".join(i.text for i in extract_items(converted.document))
    assert _recall(SCAN_TEXT, scanned) >= 0.9, scanned
