"""The `cite` result: each citation as a line (title, section, pages, uri), repairs and unknown ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, SerializeAsAny

from mcp_analysis.session.state import Citation
from mcp_analysis.text import label
from mcp_analysis.tooling.document_list import DOCUMENT_LABEL_CHARS
from mcp_analysis.tooling.fitting import largest_fit, page_span

if TYPE_CHECKING:  # session.citations reads the corpus (LanceDB): not imported before the runtime loads it
    from mcp_analysis.session.citations import CiteOutcome

ECHOED_ID_CHARS = 60  # of a given id echoed back (repaired or ignored): it may be anything
VIEW_PASSAGE_CHARS = 600  # of a cited passage sent for the view: enough to find and highlight it


class CitationOut(BaseModel):
    chunk_id: str
    document_title: str
    document_uri: str
    section: str = Field("", description="The heading the passage is under.")
    page_numbers: list[int] = Field(default_factory=list)

    @classmethod
    def of(cls, citation: Citation) -> CitationOut:
        headings = [h for h in citation.headings if h != citation.document_title]
        return cls(
            chunk_id=citation.chunk_id,
            document_title=label(citation.document_title),
            document_uri=label(citation.document_uri, DOCUMENT_LABEL_CHARS),
            section=label(headings[-1]) if headings else "",
            page_numbers=citation.page_numbers,
        )

    def line(self) -> str:
        section = f" › {self.section}" if self.section else ""
        return f"- {self.chunk_id} · {self.document_title}{section}{page_span(self.page_numbers)} · {self.document_uri}"


class ViewCitation(CitationOut):
    """A citation as the MCP App view opens it: its document and the start of its passage.

    Only hosts that render the view get these (the tool's output schema stays `CitationOut`'s)."""

    document_id: str
    passage: str

    @classmethod
    def of(cls, citation: Citation) -> ViewCitation:
        text = citation.content.strip()
        passage = text if len(text) <= VIEW_PASSAGE_CHARS else text[:VIEW_PASSAGE_CHARS].rstrip() + "…"
        return cls(**CitationOut.of(citation).model_dump(), document_id=citation.document_id, passage=passage)


class CiteOutput(BaseModel):
    session: str
    # SerializeAsAny: a ViewCitation is sent with its own fields, the schema stays CitationOut's.
    citations: list[SerializeAsAny[CitationOut]]
    repaired: dict[str, str] = Field(default_factory=dict, description="Given id -> the id it was matched to.")
    ignored: list[str] = Field(default_factory=list, description="Ids that could not be resolved.")
    no_evidence: bool = Field(False, description="cite([]) was called: the answer is not from the knowledge base.")
    total_cited: int = Field(0, description="Chunks cited for the current answer so far.")
    omitted: int = Field(0, description="Cited but not listed here (budget).")
    resource: str | None = Field(None, description="Lists every citation, when some are omitted.")

    @classmethod
    def of(cls, session: str, outcome: CiteOutcome, total_cited: int, passages: bool = False) -> CiteOutput:
        """What one cite call did; the ids the caller gave are echoed as labels. With `passages`,
        each citation carries its document id and passage (`ViewCitation`)."""
        shape = ViewCitation if passages else CitationOut
        return cls(
            session=session,
            citations=[shape.of(c) for c in outcome.citations],
            repaired={label(given, ECHOED_ID_CHARS): fixed for given, fixed in outcome.repaired.items()},
            ignored=[label(given, ECHOED_ID_CHARS) for given in outcome.ignored],
            no_evidence=outcome.no_evidence,
            total_cited=total_cited,
        )


def render_citations(out: CiteOutput) -> str:
    if out.no_evidence:
        return "Recorded: this answer is not based on the knowledge base (no citations)."
    lines = [f"Cited {len(out.citations) + out.omitted} chunk(s) ({out.total_cited} for this answer so far):"]
    lines += [c.line() for c in out.citations]
    if out.omitted:
        lines.append(f"(+{out.omitted} more cited, not listed here; all are in resource {out.resource})")
    lines += [f"note: {given!r} was read as {fixed}" for given, fixed in out.repaired.items()]
    if out.ignored:
        lines.append("ignored (not found): " + ", ".join(repr(i) for i in out.ignored))
    return "\n".join(lines)


def cite_result(model: CiteOutput, state_resource: str, note: str, budget: int) -> tuple[CiteOutput, str]:
    """All citations, or the first ones and a pointer to the state resource; long id lists shortened too."""
    citations, repaired, ignored = model.citations, list(model.repaired.items()), model.ignored
    n = len(citations) + len(repaired) + len(ignored)

    def build(k: int) -> tuple[CiteOutput, str]:
        # Listed in this order: citations, then repairs, then ignored ids (what matters most first).
        c = min(k, len(citations))
        r = min(k - c, len(repaired))
        i = min(k - c - r, len(ignored))
        cut = model.model_copy(
            update={
                "citations": citations[:c],
                "repaired": dict(repaired[:r]),
                "ignored": ignored[:i] + ([f"... {len(ignored) - i} more"] if i < len(ignored) else []),
                "omitted": len(citations) - c,
                "resource": state_resource if c < len(citations) or r < len(repaired) else None,
            }
        )
        return cut, render_citations(cut) + note

    return largest_fit(build, n, budget)
