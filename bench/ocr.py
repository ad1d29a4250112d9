"""OCR word recall and seconds per page: tesseract (what ingest uses) against rapidocr-onnxruntime.

Two sets of pages:
- rendered: pages drawn with Pillow from known text (three fonts sizes, slight rotation,
  blur and noise, like an office scan), made at run time, so the bench runs anywhere;
- --corpus DIR: real scans with ground truth, laid out as `img/NAME.png|jpg` and
  `ground_truth/NAME*.hocr` (the words of `ocrx_word` spans). We measured on
  github.com/scribeocr/ocr-benchmark (29 pages: court filings, academic papers, forms,
  receipts, tables, slides; AGPL-3.0, read in place, not redistributed).

Word recall = share of the ground truth's words (lower-cased, punctuation stripped,
counted with multiplicity) that the engine's output contains. A merged "theprofessional"
counts as two misses: that is what full-text search would miss too.

    .venv/bin/python bench/ocr.py                              # rendered pages only
    .venv/bin/python bench/ocr.py --corpus /path/to/ocr-benchmark --limit 10
"""

from __future__ import annotations

import argparse
import collections
import html
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _machine import describe, machine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TEXTS = [
    "The harbour board met on the third of March to review crane availability. Crane four was out of service "
    "for twelve hours after a hydraulic failure; the repair cost 4,800 euros and was finished on time.",
    "Quarterly revenue rose in every region except the south, where two large contracts ended. Management "
    "expects the new ferry service to recover most of the difference by the autumn.",
    "Inspectors found corrosion on three mooring bollards and recommended replacement within six months. "
    "No injuries were reported during the period under review.",
]


def words(text: str) -> list[str]:
    return [w for w in (re.sub(r"[^\w]", "", t.lower()) for t in text.split()) if w]


def recall(truth: list[str], found: list[str]) -> float:
    want, got = collections.Counter(truth), collections.Counter(found)
    return sum(min(n, got[w]) for w, n in want.items()) / max(1, sum(want.values()))


def rendered_pages(count: int) -> list[tuple[str, Any, list[str]]]:
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    rnd = random.Random(7)
    pages = []
    for index in range(count):
        text = TEXTS[index % len(TEXTS)]
        size = (26, 32, 40)[index % 3]
        font = ImageFont.load_default(size=size)
        image = Image.new("L", (2000, 900), 255)
        draw = ImageDraw.Draw(image)
        line, y = "", 80
        for word in text.split():
            if draw.textlength(f"{line} {word}", font=font) > 1800:
                draw.text((100, y), line.strip(), fill=0, font=font)
                line, y = "", y + int(size * 1.5)
            line += f" {word}"
        draw.text((100, y), line.strip(), fill=0, font=font)
        image = image.rotate(rnd.uniform(-1.2, 1.2), expand=True, fillcolor=255).filter(ImageFilter.GaussianBlur(0.7))
        noise = Image.effect_noise(image.size, 18).point(lambda v: 255 if v > 60 else 0)
        image = Image.composite(image, noise, Image.new("L", image.size, 230))
        pages.append((f"rendered-{index + 1}-{size}px", image, words(text)))
    return pages


def corpus_pages(root: Path, limit: int | None) -> list[tuple[str, Any, list[str]]]:
    from PIL import Image

    pages = []
    for image_path in sorted((root / "img").iterdir()):
        truths = sorted((root / "ground_truth").glob(f"{image_path.stem}*.hocr"))
        if not truths:
            continue
        hocr = truths[0].read_text(encoding="utf-8")
        spans = re.findall(r"class=['\"]ocrx_word['\"][^>]*>(.*?)</span>", hocr, re.S)
        truth = words(" ".join(html.unescape(re.sub(r"<[^>]+>", "", s)) for s in spans))
        pages.append((image_path.stem, Image.open(image_path), truth))
    return pages[:limit] if limit else pages


def tesseract() -> Callable[[Any], str]:
    from mcp_analysis.ingest.formats.ocr import recognise

    return lambda image: "\n".join(line.text for line in recognise(image))


def rapidocr() -> Callable[[Any], str] | None:
    try:
        import numpy as np
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    engine = RapidOCR()

    def run(image: Any) -> str:
        result, _ = engine(np.asarray(image.convert("RGB")))
        return "\n".join(r[1] for r in result or [])

    return run


def measure(engine: Callable[[Any], str], pages: list[tuple[str, Any, list[str]]], label: str) -> list[dict[str, Any]]:
    rows = []
    for name, image, truth in pages:
        started = time.perf_counter()
        text = engine(image)
        seconds = time.perf_counter() - started
        rows.append({"page": name, "recall": round(recall(truth, words(text)), 3), "seconds": round(seconds, 2)})
        print(f"{label} {name:24} recall {rows[-1]['recall']:.3f}  {seconds:6.2f} s", flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    if not rows:
        return {}
    return {
        "pages": len(rows),
        "recall_mean": round(statistics.mean(r["recall"] for r in rows), 3),
        "recall_min": min(r["recall"] for r in rows),
        "seconds_per_page": round(statistics.mean(r["seconds"] for r in rows), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, help="real scans: img/ and ground_truth/*.hocr")
    parser.add_argument("--limit", type=int, help="at most this many corpus pages")
    parser.add_argument("--rendered", type=int, default=6, help="rendered pages (default 6)")
    parser.add_argument("--no-baseline", action="store_true", help="skip rapidocr (slow)")
    args = parser.parse_args()
    sets = {"rendered": rendered_pages(args.rendered)}
    if args.corpus:
        sets["corpus"] = corpus_pages(args.corpus, args.limit)
    engines: dict[str, Callable[[Any], str] | None] = {"tesseract": tesseract()}
    if not args.no_baseline:
        engines["rapidocr"] = rapidocr()
    print(describe(), "| load", machine()["load_1_5_15"])
    figures: dict[str, Any] = {"machine": machine()}
    for set_name, pages in sets.items():
        for engine_name, engine in engines.items():
            if engine is None:
                print(f"{engine_name}: not installed (`uv sync --group dev --group bench` installs it)")
                continue
            rows = measure(engine, pages, f"{set_name:9} {engine_name:10}")
            figures[f"{set_name}/{engine_name}"] = summary(rows)
    print()
    print(f"{'set/engine':22} {'pages':>5} {'recall':>7} {'min':>6} {'s/page':>7}")
    for key, value in figures.items():
        if key != "machine" and value:
            numbers = f"{value['recall_mean']:7.3f} {value['recall_min']:6.3f} {value['seconds_per_page']:7.2f}"
            print(f"{key:22} {value['pages']:5} {numbers}")
    for set_name in sets:
        ours, base = figures.get(f"{set_name}/tesseract"), figures.get(f"{set_name}/rapidocr")
        if ours and base:
            ratio = base["seconds_per_page"] / max(ours["seconds_per_page"], 1e-9)
            print(
                f"{set_name}: rapidocr takes {ratio:.1f}x tesseract's time per page; recall "
                f"{ours['recall_mean']:.3f} (tesseract) vs {base['recall_mean']:.3f} (rapidocr)"
            )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
