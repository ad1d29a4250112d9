"""E-mail messages (.eml) through the standard library's parser.

The subject is the title; From, To, Cc and Date (ISO 8601) go into the document's
metadata ("email") and one header line of its text; the body is the plain-text part
(or the HTML part's text), split into paragraphs; text attachments (text/*, CSV, JSON)
follow under a heading each, and a forwarded message (message/rfc822) is read the same
way, nested at most `limits.max_depth` deep. Other attachments are named in a warning.
"""

from __future__ import annotations

import contextlib
import email.policy
import email.utils
import re
from email.message import EmailMessage
from typing import Any

from docling_core.types.doc import DocItemLabel, DoclingDocument

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source
from mcp_analysis.ingest.secrets import content_secret, named_secret

_HEADERS = ("from", "to", "cc", "date", "subject", "message-id")
_TEXT_TYPES = ("application/json", "application/csv", "application/xml")


def convert(source: Source) -> Converted:
    message = email.message_from_bytes(source.data, policy=email.policy.default)
    if not isinstance(message, EmailMessage) or not any(message.get(h) for h in ("from", "subject", "date")):
        raise IngestError("not an e-mail message (no From, Subject or Date header)")
    doc = DoclingDocument(name=source.stem)
    result = Converted(doc, "email")
    result.metadata["email"] = _header_values(message)
    _Reader(doc, result, source.limits.max_depth).message(message, None, 0)
    return result


def _header_values(message: EmailMessage) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in _HEADERS:
        raw = message.get(name)
        if raw is None:
            continue
        text = " ".join(str(raw).split())
        if name == "date":
            with contextlib.suppress(TypeError, ValueError):
                text = email.utils.parsedate_to_datetime(text).isoformat()
        values[name.replace("-", "_")] = text
    return values


def _paragraphs(text: str) -> list[str]:
    return [b.strip() for b in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if b.strip()]


def _html_text(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "head"]):
        tag.decompose()
    for tag in soup.find_all(["p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "table"]):
        tag.insert_after("\n\n" if tag.name != "br" else "\n")
    return soup.get_text()


class _Reader:
    def __init__(self, doc: DoclingDocument, result: Converted, max_depth: int) -> None:
        self.doc = doc
        self.result = result
        self.max_depth = max_depth

    def message(self, message: EmailMessage, parent: Any, depth: int) -> None:
        if depth > self.max_depth:
            self.result.warnings.append(f"a message nested deeper than {self.max_depth} levels was not read")
            return
        subject = " ".join(str(message.get("subject") or "").split()) or "(no subject)"
        heading = self.doc.add_title(text=subject) if depth == 0 else self.doc.add_heading(text=subject, parent=parent)
        values = _header_values(message)
        line = "; ".join(f"{k.capitalize()}: {values[k]}" for k in ("from", "to", "cc", "date") if k in values)
        if line:
            self.doc.add_text(label=DocItemLabel.TEXT, text=line, parent=heading)
        body = message.get_body(preferencelist=("plain", "html"))
        if body is not None:
            self._text(body, heading)
        for part in message.iter_attachments():
            self._attachment(part, heading, depth)

    def _text(self, part: EmailMessage, parent: Any) -> None:
        try:
            content = part.get_content()
        except (LookupError, ValueError) as exc:  # an unknown charset, a broken encoding
            self.result.warnings.append(f"the message body could not be decoded ({exc})")
            return
        if not isinstance(content, str):
            return
        text = _html_text(content) if part.get_content_subtype() == "html" else content
        for block in _paragraphs(text):
            self.doc.add_text(label=DocItemLabel.TEXT, text=block, parent=parent)

    def _attachment(self, part: EmailMessage, parent: Any, depth: int) -> None:
        name = part.get_filename() or part.get_content_type()
        kind = part.get_content_type()
        if kind == "message/rfc822":
            inner = part.get_content()
            if isinstance(inner, EmailMessage):
                self.message(inner, parent, depth + 1)
            return
        if part.get_content_maintype() != "text" and kind not in _TEXT_TYPES:
            self.result.warnings.append(f"attachment {name!r} ({kind}) not read: only text attachments are")
            return
        raw = part.get_payload(decode=True)
        secret = named_secret(name) or (content_secret(raw) if isinstance(raw, bytes) else None)
        if secret is not None:  # as a file of the folder would be (ingest/secrets.py)
            self.result.warnings.append(f"attachment {name!r} not read: it is {secret}; secrets are never documents")
            return
        heading = self.doc.add_heading(text=f"Attachment: {name}", level=2, parent=parent)
        self._text(part, heading)
