"""Ingest of a big workbook: seconds, peak RSS and chunks made, through the real command line.

Writes a --rows-row sheet (order_id, date, region, product, units, unit_price, revenue,
discount, rep, status) as .xlsx, and the same rows as .csv as the baseline (the same
table through the other reader), then runs `mcp-analysis --db KB add FILE` for each in a
fresh knowledge base, polling the RSS of the process and its conversion worker every 50 ms. Prints the chunks made
(`info`), what 256-token chunks without grouping would have been, and the xlsx/csv ratios;
a one-row file shows the fixed cost of an `add` (model load, index build).

    .venv/bin/python bench/tables.py                 # 100,000 rows
    .venv/bin/python bench/tables.py --rows 20000
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _machine import describe, machine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
HEADER = ["order_id", "date", "region", "product", "units", "unit_price", "revenue", "discount", "rep", "status"]


def rows(count: int) -> Any:
    rnd = random.Random(1)
    start = dt.date(2025, 1, 1)
    for i in range(1, count + 1):
        units, price = rnd.randint(1, 50), round(rnd.uniform(1, 200), 2)
        yield [
            i,
            start + dt.timedelta(days=i % 365),
            rnd.choice(["North", "South", "East", "West"]),
            f"P-{rnd.randint(1, 500)}",
            units,
            price,
            round(units * price, 2),
            rnd.choice([0, 0.05, 0.1]),
            f"rep{rnd.randint(1, 40)}",
            rnd.choice(["open", "shipped", "returned"]),
        ]


def write_files(directory: Path, count: int) -> tuple[Path, Path]:
    import xlsxwriter

    xlsx, csv_path = directory / "orders.xlsx", directory / "orders.csv"
    book = xlsxwriter.Workbook(str(xlsx), {"constant_memory": True})
    sheet = book.add_worksheet("Orders")
    date = book.add_format({"num_format": "yyyy-mm-dd"})
    sheet.write_row(0, 0, HEADER)
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for r, row in enumerate(rows(count), start=1):
            sheet.write_row(r, 0, row[:1])
            sheet.write_datetime(r, 1, dt.datetime.combine(row[1], dt.time()), date)
            sheet.write_row(r, 2, row[2:])
            writer.writerow([row[0], row[1].isoformat(), *row[2:]])
    book.close()
    return xlsx, csv_path


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.NoSuchProcess:
        return 0


def add(path: Path, db: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(path)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            # The add and its conversion worker (a child process) together.
            family = [watched, *watched.children(recursive=True)]
            peak = max(peak, sum(_rss(p) for p in family))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"add failed: {err or out}")
    info = subprocess.run(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "info", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    counts = json.loads(info.stdout)["rows"]
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(peak / 2**20), "chunks": counts["chunks"]}


def ungrouped_chunks(path: Path) -> int:
    """How many 256-token chunks the table would make without the per-table bound."""
    from mcp_analysis.embed.onnx_model import load_tokenizer
    from mcp_analysis.ingest import formats
    from mcp_analysis.ingest.formats.base import Source
    from mcp_analysis.ingest.tables import extract_tables, row_groups

    tokenizer = load_tokenizer(max_tokens=100_000)

    def count(texts: Any) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    data = path.read_bytes()
    converted = formats.for_file(path.name, data[:8192]).convert(Source(data, path.name))
    (table,) = extract_tables(converted.document, converted.tables)
    return len(row_groups(table, count, 256, 10**9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    print(describe(), "| load", machine()["load_1_5_15"])
    with tempfile.TemporaryDirectory(prefix="mcp-analysis-tables-") as tmp:
        work = Path(tmp)
        xlsx, csv_path = write_files(work, args.rows)
        figures: dict[str, Any] = {"machine": machine(), "rows": args.rows}
        figures["xlsx"] = add(xlsx, work / "xlsx.lancedb")
        figures["csv (baseline)"] = add(csv_path, work / "csv.lancedb")
        tiny = work / "tiny.csv"
        tiny.write_text(",".join(HEADER) + "\n" + csv_path.read_text().splitlines()[1] + "\n", encoding="utf-8")
        figures["one row (fixed cost)"] = add(tiny, work / "tiny.lancedb")
        figures["chunks_without_grouping"] = ungrouped_chunks(xlsx)
    print(f"{'file':20} {'seconds':>8} {'peak RSS MB':>12} {'chunks':>7}")
    for name in ("xlsx", "csv (baseline)", "one row (fixed cost)"):
        f = figures[name]
        print(f"{name:20} {f['seconds']:8.1f} {f['peak_rss_mb']:12} {f['chunks']:7}")
    print(f"{args.rows:,} rows; without grouping the table would be {figures['chunks_without_grouping']:,} chunks")
    x, c = figures["xlsx"], figures["csv (baseline)"]
    print(f"xlsx/csv: {x['seconds'] / c['seconds']:.2f}x the time, {x['peak_rss_mb'] / c['peak_rss_mb']:.2f}x the RSS")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
