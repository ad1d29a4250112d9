"""What a model is told (MCP host or the built-in agent): instructions, the execute_code doc, the `analyze` prompt."""

from __future__ import annotations

INSTRUCTIONS = """\
Analyse a document knowledge base. Workflow:
1. `search` finds passages (hybrid semantic + keyword); each hit has a chunk_id. Pass a larger
   `context` to see more of a hit's section.
2. For counting, totals, averages, comparisons or extraction across documents, write Python
   for `execute_code`: documents are files under /documents/{id}/ (metadata.json, content.txt,
   items.jsonl, toc.json) and `await search(q, limit=10)` / `await list_documents()` work
   inside the code. Variables persist between calls, so build results step by step.
3. Finish with `cite(chunk_ids)` for the passages your answer relies on (`cite([])` if none).
Call `new_analysis` before an unrelated question. Over HTTP without a session, results carry a
`session` value: pass it back in later calls to keep your variables.
"""

EXECUTE_CODE_DOC = """\
Run Python in this session's persistent sandbox: variables, functions and imports survive
between calls; the last expression's value is returned (like a REPL).

Documents are read-only files (pathlib.Path, open(), os.listdir, os.walk):
  /documents/{id}/metadata.json  {id, title, uri, created_at, metadata}
  /documents/{id}/content.txt    full text (markdown; tables as markdown tables)
  /documents/{id}/items.jsonl    one JSON object per line: position, self_ref, label (title,
                                 section_header, text, list_item, table, code, ...), text,
                                 page_numbers, heading_level, chunk_ids
  /documents/{id}/toc.json       section tree: heading, level, item_range, chunk_ids
`await search(query, limit=10)` returns hits, `await list_documents()` documents; each prints
as one short line, every field is an attribute or a key: hit.content (the whole passage),
hit.excerpt, hit.chunk_id, hit.document_id, hit.document_title, hit.headings, hit.page_numbers,
hit.score, hit.to_dict(); doc.id, doc.title, doc.uri, doc.metadata. Example:
  for h in await search("warranty period"): print(h.document_title, h.content[:200])

A Python subset: no class inheritance, no generators (yield), no property/staticmethod;
modules json re math pathlib datetime collections itertools functools csv hashlib base64
asyncio os time random dataclasses typing decimal bisect copy statistics. No network, no host
files. Each call has a time limit (variables from before a stopped call are kept). Output past
sandbox.max_output_chars keeps its head and tail: print summaries, not whole documents.
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
