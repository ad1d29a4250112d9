"""DoclingDocument -> flat list of items in reading order, plus the document's text.

Each item keeps docling's ``self_ref`` (``#/texts/5``, ``#/tables/0``), its label,
page numbers and heading level. Inline groups (a paragraph with bold or code spans,
which docling splits into pieces) become one item under the group's ref, so a
paragraph is a paragraph. Tables are compact pipe tables (table_text.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcp_analysis.ingest.table_text import table_text
from mcp_analysis.structure import NOISE_LABELS, SKIPPED_LABELS, render_item

if TYPE_CHECKING:  # docling is imported where documents are built (the conversion worker), not here
    from docling_core.types.doc import DocItem, DoclingDocument


@dataclass
class ItemDraft:
    position: int
    self_ref: str
    label: str
    text: str
    page_numbers: list[int] = field(default_factory=list)
    heading_level: int | None = None
    chunk_ids: list[str] = field(default_factory=list)


def _pages(item: DocItem) -> list[int]:
    return sorted({p.page_no for p in getattr(item, "prov", []) or []})


def _join_inline(parts: list[str]) -> str:
    text = ""
    for part in parts:
        part = part.strip()
        if not part:
            continue
        if text and not re.match(r"[.,;:!?)\]}%]", part) and not text.endswith(("(", "[", "{", "/")):
            text += " "
        text += part
    return text


def _item_text(item: DocItem, doc: DoclingDocument) -> str:
    from docling_core.types.doc import PictureItem, TableItem, TextItem

    if isinstance(item, TableItem):
        try:
            return table_text(item, doc).strip()
        except Exception:  # pragma: no cover - defensive: malformed tables
            return ""
    if isinstance(item, PictureItem):
        caption = item.caption_text(doc) if hasattr(item, "caption_text") else ""
        return caption.strip() or "[picture]"
    if isinstance(item, TextItem):
        return item.text.strip()
    return ""


def extract_items(doc: DoclingDocument) -> list[ItemDraft]:
    """Items in reading order: the body, plus page headers/footers (labelled, left out of chunks)."""
    from docling_core.types.doc import ContentLayer, DocItem, GroupItem, GroupLabel, SectionHeaderItem, TitleItem

    drafts: list[ItemDraft] = []
    consumed: set[str] = set()
    layers = {ContentLayer.BODY, ContentLayer.FURNITURE}
    for node, _level in doc.iterate_items(with_groups=True, included_content_layers=layers):
        ref = node.self_ref
        if ref in consumed:
            continue
        if isinstance(node, GroupItem):
            if node.label == GroupLabel.INLINE:
                parts: list[str] = []
                pages: set[int] = set()
                for child, _ in doc.iterate_items(root=node, with_groups=False, included_content_layers=layers):
                    consumed.add(child.self_ref)
                    if isinstance(child, DocItem):
                        parts.append(_item_text(child, doc))
                        pages.update(_pages(child))
                text = _join_inline(parts)
                if text:
                    parent = node.parent.resolve(doc) if node.parent else None
                    label = "list_item" if getattr(parent, "label", None) == "list_item" else "text"
                    drafts.append(ItemDraft(len(drafts), ref, label, text, sorted(pages)))
            continue
        if not isinstance(node, DocItem):
            continue
        label = str(node.label.value if hasattr(node.label, "value") else node.label)
        if node.content_layer == ContentLayer.FURNITURE and label not in NOISE_LABELS:
            continue  # e.g. HTML <head><title>: metadata, not part of the text
        text = _item_text(node, doc)
        if not text:
            continue
        level: int | None = None
        if isinstance(node, TitleItem):
            level = 0
        elif isinstance(node, SectionHeaderItem):
            level = int(node.level)
        drafts.append(ItemDraft(len(drafts), ref, label, text, _pages(node), level))
    return drafts


TITLE_CHARS = 300  # a document's title and page title are cut here


def document_title(doc: DoclingDocument, items: list[ItemDraft], fallback: str) -> str:
    for item in items:
        if item.label == "title":
            return item.text[:TITLE_CHARS]
    for item in items:
        if item.label == "section_header":
            return item.text[:TITLE_CHARS]
    return fallback


def page_title(doc: DoclingDocument) -> str | None:
    """The title the file gives itself outside its text (an HTML page's ``<head><title>``), if any.
    A manual's or a site's pages name it there ("Structures (libffi: the portable foreign function
    interface library)") while their first heading, the document's title, does not ("2.3.2
    Structures"); ranking reads it to tell which pages a question naming the manual means."""
    from docling_core.types.doc import ContentLayer, TitleItem

    for node, _ in doc.iterate_items(included_content_layers={ContentLayer.FURNITURE}, with_groups=False):
        if isinstance(node, TitleItem) and node.content_layer == ContentLayer.FURNITURE and node.text.strip():
            return " ".join(node.text.split())[:TITLE_CHARS]
    return None


def render_content(items: list[ItemDraft]) -> str:
    """The document as markdown-ish text (what content.txt serves); page furniture left out."""
    blocks = [render_item(i.label, i.text, i.heading_level) for i in items if i.label not in SKIPPED_LABELS]
    return "\n\n".join(blocks) + ("\n" if blocks else "")
