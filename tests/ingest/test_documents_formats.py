"""Slides, OpenDocument, e-books and e-mails: structure, pages, tables, what could not be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.cells import parse_lines
from mcp_analysis.ingest.items import extract_items
from mcp_analysis.ingest.tables import extract_tables
from tests.format_files import convert_file, encrypt_office, write_deck, write_eml, write_epub, write_odp, write_odt


def _convert(path: Path):  # type: ignore[no-untyped-def]
    return convert_file(path)


def test_a_deck_has_slide_titles_as_headings_notes_tables_and_slide_numbers_as_pages(tmp_path: Path) -> None:
    converted = _convert(write_deck(tmp_path / "results.pptx"))
    items = extract_items(converted.document)
    seen = [(i.label, i.text, i.page_numbers) for i in items if i.label != "table"]
    assert seen == [
        ("section_header", "Fleet results 2025", [1]),
        ("text", "Revenue grew in every region", [1]),
        ("list_item", "North up 12 percent", [1]),
        ("text", "Notes: Mention the port contract.", [1]),
        ("section_header", "Regional table", [2]),
    ]
    tables = extract_tables(converted.document, converted.tables)
    assert [parse_lines(t.lines) for t in tables] == [
        [["Region", "Q1", "Q2"], ["North", "1200.50", "1300"], ["South", "900", "950"]],
        [["", "Units"], ["Q1", "10"], ["Q2", "12.5"]],  # the chart's data
    ]
    assert all(t.page_numbers == [2] for t in tables)


def test_corrupt_and_encrypted_decks_are_refused_with_the_reason(tmp_path: Path) -> None:
    deck = write_deck(tmp_path / "deck.pptx")
    corrupt = tmp_path / "corrupt.pptx"
    corrupt.write_bytes(deck.read_bytes()[:4000])
    with pytest.raises(IngestError, match="not a readable slide deck"):
        _convert(corrupt)
    with pytest.raises(IngestError, match="password-protected"):
        _convert(encrypt_office(deck, tmp_path / "locked.pptx"))


def test_opendocument_text_and_presentation(tmp_path: Path) -> None:
    odt = _convert(write_odt(tmp_path / "interviews.odt"))
    labels = [(i.label, i.text) for i in extract_items(odt.document) if i.label != "table"]
    assert labels == [
        ("section_header", "Port authority interviews"),
        ("text", "Twelve interviews were held in March 2025."),
        ("list_item", "Berth delays"),
        ("list_item", "Crane downtime"),
    ]
    (table,) = extract_tables(odt.document)
    assert parse_lines(table.lines) == [["Port", "Delay (h)"], ["Rotterdam", "12.5"], ["Hamburg", "8"]]
    odp = _convert(write_odp(tmp_path / "outlook.odp"))
    pages = [(i.text, i.page_numbers) for i in extract_items(odp.document)]
    assert pages == [("Overview", [1]), ("Fleet overview", [1]), ("Outlook", [2]), ("Ferry service in autumn", [2])]


def test_an_epub_is_read_chapter_by_chapter_with_its_tables(tmp_path: Path) -> None:
    converted = _convert(write_epub(tmp_path / "tales.epub"))
    texts = [i.text for i in extract_items(converted.document)]
    assert texts.index("Chapter 1") < texts.index("The ship Aurora arrived at dawn.") < texts.index("Chapter 2")
    (table,) = extract_tables(converted.document)
    assert parse_lines(table.lines) == [["Ship", "Tons"], ["Aurora", "1200000"]]
    damaged = tmp_path / "damaged.epub"
    damaged.write_bytes(b"PK\x03\x04 not an archive")
    with pytest.raises(IngestError, match="could not open this e-book"):
        _convert(damaged)


def test_an_email_has_headers_as_metadata_its_body_and_text_attachments(tmp_path: Path) -> None:
    converted = _convert(write_eml(tmp_path / "downtime.eml"))
    assert converted.metadata["email"] == {
        "from": "Ana Lima <ana@example.org>",
        "to": "ops@example.org",
        "date": "2025-04-01T09:30:00+02:00",
        "subject": "Crane downtime in March",
    }
    texts = [(i.label, i.text) for i in extract_items(converted.document)]
    assert texts[0] == ("title", "Crane downtime in March")
    assert ("text", "Crane four was down twelve hours.") in texts  # the plain part, not the HTML twice
    assert ("section_header", "Attachment: delays.csv") in texts
    assert any("Rotterdam,12.5" in text for _, text in texts)
    assert converted.warnings == ["attachment 'scan.pdf' (application/pdf) not read: only text attachments are"]
    binary = tmp_path / "x.eml"
    binary.write_bytes(b"\x00\x01 binary")
    with pytest.raises(IngestError, match="not an e-mail"):
        convert_file(binary)


def test_an_emails_attachment_that_is_a_key_is_not_read(tmp_path: Path) -> None:
    """ingest/secrets.py's checks, on attachments as on files: by name, and by their first bytes."""
    from email.message import EmailMessage

    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAASECRET\n-----END OPENSSH PRIVATE KEY-----\n"
    message = EmailMessage()
    message["Subject"] = "Access for the new server"
    message.set_content("The files you asked for.")
    message.add_attachment(key, subtype="plain", filename="id_ed25519")
    message.add_attachment(key, subtype="plain", filename="deploy.txt")
    message.add_attachment("Rotate the keys every spring.\n", subtype="plain", filename="notes.txt")
    path = tmp_path / "access.eml"
    path.write_bytes(bytes(message))

    converted = _convert(path)

    texts = " ".join(i.text for i in extract_items(converted.document))
    assert "Rotate the keys every spring." in texts and "SECRET" not in texts and "id_ed25519" not in texts
    assert converted.warnings == [
        "attachment 'id_ed25519' not read: it is named like an SSH private key; secrets are never documents",
        "attachment 'deploy.txt' not read: it is a private key (it begins with -----BEGIN OPENSSH PRIVATE KEY-----);"
        " secrets are never documents",
    ]


DATA = Path(__file__).parent / "data"


def test_decks_saved_by_powerpoint_are_read_with_their_merged_cells_and_notes() -> None:
    tables = _convert(DATA / "tbl-cell.pptx")
    found = extract_tables(tables.document)
    assert [(t.rows, t.columns) for t in found] == [(2, 4), (1, 3), (1, 5), (3, 3)]
    assert parse_lines(found[3].lines) == [["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"]]
    assert parse_lines(found[1].lines) == [["merged cell"]]  # the value sits in the merged range's first cell
    notes = _convert(DATA / "sld-notes.pptx")
    assert [(i.text, i.page_numbers) for i in extract_items(notes.document)] == [
        ("Slide 1", [1]),
        ("Notes: Notes", [1]),
        ("Slide 2", [2]),
    ]
