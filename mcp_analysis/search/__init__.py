"""Hybrid search over a corpus: vector + full text, re-ranked by fused scores, grown into passages.

Contract: the caller's document filter is applied inside both legs before ranking
(hybrid.py), so a filtered-out document can never take a result slot; candidates are ordered
by one score of meaning, words and the title the query names (rerank.py; `search.rerank:
false` keeps reciprocal-rank fusion), near-duplicates of a better hit of another document come
after the distinct ones; each hit is grown with its section's neighbouring items (expand.py)
and shown as the window of its passage where the best-scoring chunks lie, then where the
query's words are densest (excerpt.py); re-ranked hits share one budget of characters, the
best-ranked getting more (budget.py). Untrusted text in results (titles, headings,
metadata) is cut as a label before any budget is applied.
"""
