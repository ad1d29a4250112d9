"""What a conversion worker's warm-up costs, with every parser family or only the markdown one.

A worker imports its parsers and converts two tiny samples before its first file (ingest/worker.py),
so that the memory cap is set above what the parsers hold. Would importing only the families a
batch needs make a worker cheaper? Each variant runs in a fresh interpreter, in turns, and prints
its CPU seconds (the imports, then the whole warm-up with the tokenizer and the samples) and the
resident and data sizes after it.

    python bench/worker_warm.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = """
import importlib, json, resource, sys
def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime
start = cpu()
families, samples = sys.argv[1].split(","), int(sys.argv[2])
for family in families:
    importlib.import_module(f"mcp_analysis.ingest.formats.{family}")
from mcp_analysis.ingest.prepare import prepare
imported = cpu()
from mcp_analysis.embed.onnx_model import load_tokenizer
from mcp_analysis.ingest.formats.base import Source
from mcp_analysis.ingest.worker import _SAMPLES
tokenizer = load_tokenizer(max_tokens=100_000)
for name, sample in _SAMPLES[:samples]:
    prepare(Source(sample, name), tokenizer, 256)
done = cpu()
sizes = {}
for line in open("/proc/self/status"):
    if line.startswith(("VmRSS:", "VmData:")):
        sizes[line.split(":")[0]] = int(line.split()[1]) // 1024
docling = "docling_core.types.doc" in sys.modules
print(json.dumps({"imports": imported - start, "warm": done - start, "docling": docling, **sizes}))
"""

VARIANTS = {
    "every family (today)": ("markdown,html,docx,pdf,pdf_layout,text,code", 2),
    "markdown, text, code; the markdown sample": ("markdown,text,code", 1),
    "markdown, html, text, code; both samples": ("markdown,html,text,code", 2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for _ in range(runs):
        for name, (families, samples) in VARIANTS.items():
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, families, str(samples)], capture_output=True, text=True, check=True
            ).stdout
            seen[name].append(json.loads(out.strip().splitlines()[-1]))
    for name, results in seen.items():
        imports = [r["imports"] for r in results]
        warm = [r["warm"] for r in results]
        print(
            f"{name:45s} imports {min(imports):.2f}-{max(imports):.2f} s CPU, warm-up {min(warm):.2f}-"
            f"{max(warm):.2f} s (median {statistics.median(warm):.2f}), RSS {results[-1]['VmRSS']} MB, "
            f"data {results[-1]['VmData']} MB, docling's document model loaded: {results[-1]['docling']}"
        )


if __name__ == "__main__":
    main()
