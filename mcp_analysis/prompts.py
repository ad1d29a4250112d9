"""What a model is told (MCP host or the built-in agent): instructions, the execute_code doc, the `analyze` prompt."""

from __future__ import annotations

INSTRUCTIONS = """\
Analyse a document knowledge base. Workflow:
1. `search` finds relevant passages (hybrid semantic + keyword); every hit has a chunk_id.
2. For counting, totals, averages, comparisons or extraction across documents, write Python
   for `execute_code`: documents are files under /documents/{id}/ (metadata.json, content.txt,
   items.jsonl, toc.json) and `await search(q, limit=10)` / `await list_documents()` work
   inside the code. Variables persist between calls, so build results step by step.
3. Finish with `cite(chunk_ids)` for the passages your answer relies on (`cite([])` if none).
Call `new_analysis` before an unrelated question. Over HTTP without a session, results carry a
`session` value: pass it back in later calls to keep your variables.
"""

EXECUTE_CODE_DOC = """\
Run Python in this session's persistent sandbox (variables, functions and imports survive
between calls; the last expression's value is returned, like a REPL).

The documents are a read-only filesystem:
  /documents/{id}/metadata.json  {id, title, uri, created_at, metadata}
  /documents/{id}/content.txt    full text (markdown; tables as markdown tables)
  /documents/{id}/items.jsonl    one JSON object per line: position, self_ref, label
                                 (title, section_header, text, list_item, table, code, ...),
                                 text, page_numbers, heading_level, chunk_ids
  /documents/{id}/toc.json       section tree: heading, level, item_range, chunk_ids
Use pathlib.Path (iterdir, glob, read_text) or open(); os.listdir/os.walk work too.
Host functions: `await search(query, limit=10)` -> list of dicts (chunk_id, content,
document_id, document_title, document_uri, score, page_numbers, headings, doc_item_refs);
`await list_documents()` -> list of {id, title, uri, created_at, metadata}.

The interpreter is a sandboxed Python subset: no class inheritance, no generators (yield),
no property/staticmethod decorators; modules: json, re, math, pathlib, datetime, collections,
itertools, functools, csv, hashlib, base64, asyncio, os, time, random, dataclasses, typing,
decimal, bisect, copy, statistics (mean, median, stdev, quantiles, ...). No network and no
host filesystem. Each call has a time limit; if it is hit, variables from before the call are
kept. Print summaries, not whole documents.
"""

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
