"""What a model is told, by either front door (MCP host or pydantic-ai agent).

The instructions, each tool's description and each shared argument's description live
here once: the MCP server (server/tools.py) and the pydantic-ai toolset (agent/toolset.py)
both register their tools with these texts, so the two can never drift apart. Texts say
what a tool does and returns, not how one front door lays its result out.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

INSTRUCTIONS = """\
Analyse a document knowledge base. Workflow:
1. `search` finds passages (hybrid semantic + keyword); each hit has a chunk_id. Pass a larger
   `context` to see more of a hit's section.
2. For counting, totals, averages, comparisons or extraction across documents, write Python
   for `execute_code`: documents are files under /documents/{id}/ (metadata.json, content.txt,
   items.jsonl, toc.json, tables.json) and `await search(q, limit=10)` / `await list_documents()` work
   inside the code. Variables persist between calls, so build results step by step.
3. Finish with `cite(chunk_ids)` for the passages your answer relies on (`cite([])` if none).
Call `new_analysis` before an unrelated question. Over HTTP without a session, results carry a
`session` value: pass it back in later calls to keep your variables.
"""

# ----------------------------------------------------------------------------- tools

SEARCH = """\
Hybrid (semantic + keyword) search. Each hit: chunk_id (to cite), document, section, pages and
the passage around the match. Example: search(query="average revenue 2025", limit=5)"""

LIST_DOCUMENTS = """\
List the documents you can see: id, title, uri (and your metadata), a page at a time.
Example: list_documents(offset=40)"""

EXECUTE_CODE = """\
Run Python in this session's persistent sandbox: variables, functions and imports survive
between calls; the last expression's value is returned (like a REPL).

Documents are read-only files (pathlib.Path, open(), os.listdir, os.walk):
  /documents/{id}/metadata.json  {id, title, uri, created_at, metadata}
  /documents/{id}/content.txt    full text (markdown; tables as markdown tables)
  /documents/{id}/items.jsonl    one JSON object per line: position, self_ref, label (title,
                                 section_header, text, list_item, table, code, ...), text,
                                 page_numbers, heading_level, chunk_ids
  /documents/{id}/toc.json       section tree: heading, level, item_range, chunk_ids
  /documents/{id}/tables.json    tables: index, name, title, header, path (tables/{n}.csv: rows from the header)
`await search(query, limit=10)` returns hits, `await list_documents()` documents; each prints
as one short line, every field is an attribute or a key: hit.content (the whole passage),
hit.excerpt, hit.chunk_id, hit.document_id, hit.document_title, hit.headings, hit.page_numbers,
hit.score, hit.to_dict(); doc.id, doc.title, doc.uri, doc.metadata. Example:
  for h in await search("warranty period"): print(h.document_title, h.content[:200])
`await chart({"mark": "bar", "data": {"values": rows}, "encoding": {...}})` draws a Vega-Lite
chart into the result (rows inline: aggregate them first).

A Python subset: no class inheritance, no generators (yield), no property/staticmethod;
modules json re math pathlib datetime collections itertools functools csv hashlib base64
asyncio os time random dataclasses typing decimal bisect copy statistics. No network, no host
files. Each call has a time limit (variables from before a stopped call are kept). Output past
sandbox.max_output_chars keeps its head and tail: print summaries, not whole documents.
"""

CITE = """\
Register the chunk_ids your answer rests on (cite([]) if it is not from the documents). Returns
each citation's title, section, pages and uri. Near-miss ids are repaired, unknown ones listed.
Example: cite(chunk_ids=["6b0a642e-247b-42f3-8dd8-1ecdb767fff8"])"""

NEW_ANALYSIS = """\
Start a new analysis for an unrelated question: clears variables, executions, searches and
citations (keeps the citation index and the filter). Example: new_analysis()"""

ANALYSIS_STATE = """\
This session in brief: one line per execution, the searches, one line per citation, and the
resource holding the full state (every program and its output). Example: analysis_state()"""

# ----------------------------------------------------------------------------- the `analyze` prompt (MCP)

ANALYZE_PROMPT = """\
Answer this question from the document knowledge base:

{question}

How to work:
- Start with `search` to find the relevant documents and passages.
- If the answer needs counting, arithmetic, comparison across documents or extracting values
  (amounts, dates, names), use `execute_code`: loop over /documents/*/content.txt or
  items.jsonl, compute in Python, print a compact result. Check intermediate results; refine
  the code instead of guessing. Variables persist between calls.
- Do not state numbers you did not read or compute.
- Call `cite` with the chunk_ids of the passages that support the answer (chunk_ids come from
  search results and from the chunk_ids fields of items.jsonl / toc.json); `cite([])` if the
  knowledge base does not contain the answer.
- Then give a concise answer, naming the documents it rests on.
"""

# ----------------------------------------------------------------------------- arguments
# The same names, bounds and descriptions for both front doors (pydantic-ai reads `Field` too).

Query = Annotated[str, Field(description="What to look for (words or a question).")]
HitLimit = Annotated[int | None, Field(description="Number of hits (default 5).", ge=1, le=50)]
PassageChars = Annotated[
    int | None, Field(description="Characters shown per hit's passage, on average (default 900).", ge=100, le=100_000)
]
Code = Annotated[str, Field(description="Python source to run.")]


def _chunk_id_list(value: object) -> object:
    """One bare string is the usual slip (`--tool-arg chunk_ids=<id>` in the Inspector): say the shape."""
    if isinstance(value, str):
        raise ValueError(
            'chunk_ids takes a JSON array of chunk ids, e.g. ["6b0a642e-247b-42f3-8dd8-1ecdb767fff8"] ([] if the '
            "answer is not from the documents), not one string; in the MCP Inspector CLI: "
            "--tool-arg 'chunk_ids=[\"<chunk id>\"]'"
        )
    return value


ChunkIds = Annotated[
    list[str],
    BeforeValidator(_chunk_id_list),
    Field(description="chunk_id values supporting the answer; [] if the answer is not from the documents."),
]
PageOffset = Annotated[int, Field(description="Skip this many documents (paging).", ge=0)]
PageSize = Annotated[int, Field(description="Documents per page.", ge=1, le=1000)]
DOCUMENTS_PAGE = 40  # documents per list_documents page, unless the caller asks for another size
