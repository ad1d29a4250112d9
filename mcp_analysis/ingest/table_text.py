"""A table's text in a document (content.txt, chunks, passages): a compact pipe table.

docling's own markdown pads every cell to its column's widest (a sheet's 75-character title
widens every column) and repeats a merged cell in each column it covers. Here each cell is
written once, where it starts, with no padding; blank rows are left out; the title and notes
above the header row and the footer below the data (table_layout.py) are lines of their own
around the table, so a workbook's merged title reads as one line, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_analysis.ingest.formats.cells import CsvLines
from mcp_analysis.ingest.table_layout import detect

if TYPE_CHECKING:  # docling is imported where documents are built (the conversion worker), not here
    from docling_core.types.doc import DoclingDocument, TableCell, TableItem


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _text(cell: TableCell, doc: DoclingDocument) -> str:
    """A cell's text; a rich cell (a group of items in the cell) has it in its items."""
    ref = getattr(cell, "ref", None)
    if ref is None:
        return cell.text
    node = ref.resolve(doc)
    texts = [item.text for item, _ in doc.iterate_items(root=node, with_groups=False) if hasattr(item, "text")]
    return " ".join(texts) or cell.text


def table_grid(table: TableItem, doc: DoclingDocument) -> list[list[str]]:
    """The table's rows, each cell's text in the first row and column it covers only."""
    data = table.data
    grid = [[""] * data.num_cols for _ in range(data.num_rows)]
    for cell in data.table_cells:
        row, column = cell.start_row_offset_idx, cell.start_col_offset_idx
        if row < data.num_rows and column < data.num_cols:
            grid[row][column] = _cell(_text(cell, doc))
    return grid


def pipe_table(rows: list[list[str]]) -> str:
    """Rows as a markdown pipe table, the first row the header, without padding."""
    width = max((len(r) for r in rows), default=0)
    lines = ["|" + "".join(f" {c} |" if c else " |" for c in r + [""] * (width - len(r))) for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


def table_text(table: TableItem, doc: DoclingDocument) -> str:
    """The table as text (see module docs); empty when it has no cell with text."""
    grid = table_grid(table, doc)
    encoder = CsvLines()
    layout = detect([encoder.line(row) if any(row) else "" for row in grid])
    body_end = len(grid) - layout.footer_rows
    rows = [row for row in grid[layout.header_row : body_end] if any(row)]
    while rows and len(rows[0]) > 1 and not any(r[-1] for r in rows):
        rows = [r[:-1] for r in rows]  # empty columns at the right
    parts = [line for line in (layout.title, *layout.notes) if line]
    if rows:
        parts.append(pipe_table(rows) if len(rows) > 1 or len(rows[0]) > 1 else rows[0][0])
    parts += layout.footer
    return "\n\n".join(parts)
