"""Which Python runs the product's processes faster: the same work under two or more interpreters.

The suite and a server spend most of their CPU starting processes (imports) and in pure Python.
How fast that goes depends on how the interpreter was built: a distribution's python3 (Debian's:
profile-guided, linked statically) or one built from source without `--enable-optimizations`
(pyenv's default, libpython shared). Each round runs every step in a fresh process of each
environment, in turns, and prints CPU seconds (user + sys of the child) as a range and median, and
each environment's ratio to the first one's medians.

    python bench/interpreters.py .venv/bin/python /tmp/other/.venv/bin/python [--runs 5]

Each path is the `python` of an environment with mcp-analysis installed (`uv sync`; give uv
`UV_PYTHON=/usr/bin/python3` for the distribution's build).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

STEPS = {
    "server's imports": "import mcp_analysis.server.app",
    "command line's imports": "import mcp_analysis.cli.app",
    "conversion worker's warm-up": "from mcp_analysis.ingest.worker import _warm_up; _warm_up()",
    "pure Python (dicts, json, re)": (
        "import json, re\n"
        "d = {str(i): [i, i * 2, {'a': i}] for i in range(300000)}\n"
        "json.loads(json.dumps(list(d.items())[:50000]))\n"
        "sum(len(re.findall(r'\\d+', k)) for k in d)"
    ),
}


def child_cpu(python: str, code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "-c", code], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def version(python: str) -> str:
    code = "import sys; print(sys.version.split()[0])"
    number = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    linked = subprocess.run(["ldd", python], capture_output=True, text=True).stdout
    return number + (", libpython shared" if "libpython" in linked else ", linked statically")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pythons", nargs="+", help="each environment's python; the first is the baseline")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for python in args.pythons:
        print(f"{python}: Python {version(python)}")
    seen = {(python, step): [] for python in args.pythons for step in STEPS}
    for python in args.pythons:  # one unmeasured round: bytecode and the disk cache warm
        for code in STEPS.values():
            child_cpu(python, code)
    for _ in range(args.runs):
        for step, code in STEPS.items():
            for python in args.pythons:
                seen[python, step].append(child_cpu(python, code))
    base = args.pythons[0]
    for step in STEPS:
        print(step)
        for python in args.pythons:
            cpu = seen[python, step]
            ratio = statistics.median(cpu) / statistics.median(seen[base, step])
            spread = f"{min(cpu):.2f}-{max(cpu):.2f} s CPU (median {statistics.median(cpu):.2f})"
            print(f"  {python:50s} {spread}, x{ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
