"""The detail tables of bench/search.py: phases of a search, vector index choices, an add at scale."""

from __future__ import annotations

from typing import Any


def report_details(rows: list[dict[str, Any]], choices: dict[int, list[dict[str, Any]]], added: Any) -> None:
    """Print where the time goes (first run of each size), each index choice, and the add's timings."""
    firsts = [r for r in rows if r["run"] == 1]
    if firsts:
        names = list(firsts[0]["phases_ms"])
        print("\nmedian ms per query of each phase (first run; unfiltered / filtered):")
        print(f"{'phase':>32} " + " ".join(f"{r['chunks']:>15}" for r in firsts))
        for name in names:
            cells = [f"{r['phases_ms'][name]:6.1f} / {r['filtered_phases_ms'][name]:6.1f}" for r in firsts]
            print(f"{name:>32} " + " ".join(f"{c:>15}" for c in cells))
    for r in firsts:
        sizes = ", ".join(f"{name} {mb} MB" for name, mb in r.get("index_mb", {}).items())
        print(f"indexes of the chunks table at {r['chunks']} chunks: {sizes}")
        if r.get("item_spans_s") is not None:
            print(
                f"where each document's items sit, found at {r['chunks']} chunks in {r['item_spans_s']:.2f} s "
                f"({r['item_spans_documents']} documents in one run each; store/item_offsets.py)"
            )
    for size, found in choices.items():
        print(f"\nvector index choices at {size} chunks (vector leg as search runs it, {len(found)} settings):")
        print(f"{'index':>42} {'build s':>8} {'nprobes':>7} {'ef':>5} {'refine':>6} {'recall@10':>9} {'p50 ms':>7}")
        for c in found:
            build = f"{c['build_s']:.0f}" if c["build_s"] is not None else "-"
            print(
                f"{c['index']:>42} {build:>8} {c.get('nprobes', '-'):>7} {c.get('ef', '-'):>5} "
                f"{c['refine_factor']:>6} {c['recall_at_10']:>9.3f} {c['p50_ms']:>7.1f}"
            )
    if added:
        print(f"\nadding {added['docs']} documents to {added['chunks_before']} chunks (on a copy):")
        for key, value in added.items():
            print(f"  {key}: {round(value, 1) if isinstance(value, float) else value}")
