"""A PDF page's text layer as lines, with font size, weight and position (pypdfium2)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Line:
    text: str
    size: float
    bold: bool
    top: float
    bottom: float
    left: float
    right: float
    page: int
    page_height: float
    cells: list[str] | None = None  # set when wide gaps split the line into table cells


def _font_is_bold(textpage: object, index: int) -> bool:
    import ctypes

    import pypdfium2.raw as raw

    weight = raw.FPDFText_GetFontWeight(textpage.raw, index)  # type: ignore[attr-defined]
    if weight >= 600:
        return True
    buffer = ctypes.create_string_buffer(128)
    flags = ctypes.c_int(0)
    n = raw.FPDFText_GetFontInfo(textpage.raw, index, buffer, 128, ctypes.byref(flags))  # type: ignore[attr-defined]
    name = buffer.raw[: max(0, n - 1)].decode("latin-1", "replace").lower()
    return "bold" in name or "black" in name or "heavy" in name


def _cells(textpage: object, text: str, first: int, last: int, size: float) -> list[str] | None:
    """Split a line where the gap between words is much wider than a space (table columns)."""
    cells: list[str] = []
    start = first
    position = first
    while position <= last:
        if text[position] == " ":
            before = position - 1
            after = position
            while after <= last and text[after] == " ":
                after += 1
            if before >= first and after <= last:
                gap = textpage.get_charbox(after)[0] - textpage.get_charbox(before)[2]  # type: ignore[attr-defined]
                if gap > max(size, 1.0) * 1.5:
                    cells.append(text[start:position].strip())
                    start = after
            position = after
            continue
        position += 1
    if not cells:
        return None
    cells.append(text[start : last + 1].strip())
    return [c for c in cells if c] if len([c for c in cells if c]) >= 2 else None


def page_lines(page: object, page_no: int) -> list[Line]:
    import pypdfium2.raw as raw

    textpage = page.get_textpage()  # type: ignore[attr-defined]
    height = float(page.get_height())  # type: ignore[attr-defined]
    count = textpage.count_chars()
    text = textpage.get_text_range(0, count) if count else ""
    lines: list[Line] = []
    start = 0
    position = 0
    length = len(text)
    while position <= length:
        if position == length or text[position] in "\r\n":
            segment = text[start:position]
            stripped = segment.strip()
            if stripped:
                first = start + (len(segment) - len(segment.lstrip()))
                last = start + len(segment.rstrip()) - 1
                if first < count:
                    size = float(raw.FPDFText_GetFontSize(textpage.raw, first))
                    left, bottom, _right, top = textpage.get_charbox(first)
                    right = textpage.get_charbox(min(last, count - 1))[2]
                    bold = _font_is_bold(textpage, first)
                    cells = _cells(textpage, text, first, last, size)
                    lines.append(Line(stripped, size, bold, top, bottom, left, right, page_no, height, cells))
            while position < length and text[position] in "\r\n":
                position += 1
            start = position
            if position == length:
                break
            continue
        position += 1
    return lines
