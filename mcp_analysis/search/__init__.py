"""Hybrid search over a corpus: vector + full text fused by rank, grown into passages.

Contract: the caller's document filter is applied inside both legs before ranking
(hybrid.py), so a filtered-out document can never take a result slot; each hit is grown
with its section's neighbouring items (expand.py) and shown as the window of its passage
where the query's words are densest (excerpt.py). Untrusted text in results (titles,
headings, metadata) is cut as a label before any budget is applied.
"""
