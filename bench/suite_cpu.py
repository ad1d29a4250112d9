"""Where the test suite's CPU goes, by the kind of process that spent it.

Two records joined by process id: the kernel's process accounting (every process that ended, with its
CPU time, whatever killed it: `accton`, Debian's `acct` package, as root) and a line per Python process
at its start naming its command line (a `.pth` hook this script puts in a virtual environment). The
report sums CPU seconds per kind: conversion workers, servers, CLI commands, chart renderers, Ray's
processes, the pytest processes themselves; `--by-module` sums them instead per test module, the one
whose test was running in the pytest process that started them (`PYTEST_CURRENT_TEST`, which a child
inherits; a process started by another, such as a server's conversion worker, inherits it too).
Keyed by process id: a reused id, or a Python process that execs another, is counted under the
command it started with (rare in a suite's ten minutes).

    python bench/suite_cpu.py hook .venv                  # each Python start appends to $SPAWNLOG
    accton /var/log/account/pacct                         # as root; `accton off` afterwards
    SPAWNLOG=/tmp/spawns.txt bash .ci/run
    dump-acct /var/log/account/pacct > /tmp/pacct.txt
    python bench/suite_cpu.py report /tmp/pacct.txt /tmp/spawns.txt
    python bench/suite_cpu.py unhook .venv
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

HOOK = """import json, os, sys, time
_log = os.environ.get("SPAWNLOG")
if _log:
    try:
        with open(_log, "a") as _out:
            _out.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": list(sys.orig_argv),
                                   "t": time.time(), "test": os.environ.get("PYTEST_CURRENT_TEST", "")}) + "\\n")
    except OSError:
        pass
"""
TICKS = 100  # dump-acct prints user and system time in clock ticks (AHZ)


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        sys.exit(f"no site-packages under {venv}")
    return found[0]


COMMANDS = {"serve", "add", "sync", "rm", "list", "search", "info", "exec", "analyze"}
VALUED = {"--db", "--config"}  # options before the command that take a value


def kind(argv: list[str]) -> str:
    line = " ".join(argv[1:])
    for module, name in (
        ("mcp_analysis.ingest.worker", "conversion worker"),
        ("mcp_analysis.charts.worker", "chart renderer"),
        ("moto.server", "object store (moto)"),
    ):
        if module in line:
            return name
    program = Path(argv[1]).name if len(argv) > 1 else ""
    if program == "pytest" or "exec(eval(" in line:
        return "pytest and its xdist workers"
    if "-m" in argv and argv.index("-m") + 1 < len(argv) and argv[argv.index("-m") + 1] == "mcp_analysis":
        rest = argv[argv.index("-m") + 2 :]
    elif program == "mcp-analysis":
        rest = argv[2:]
    else:
        return "Ray process" if "ray" in line else "other Python"
    words = iter(rest)
    for word in words:
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return "server" if word == "serve" else f"CLI {word}" if word in COMMANDS else "CLI, other"
    return "CLI, other"


def report(accounting: Path, spawns: Path, by_module: bool = False) -> None:
    spent: dict[int, float] = {}
    for line in accounting.read_text().splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) > 10:
            spent[int(fields[9])] = (float(fields[2]) + float(fields[3])) / TICKS
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for line in spawns.read_text().splitlines():
        started = json.loads(line)
        if started["pid"] in spent:
            name = kind(started["argv"])
            if by_module:
                if name == "pytest and its xdist workers" or not started.get("test"):
                    continue
                name = started["test"].split("::")[0]
            cpu[name] += spent[started["pid"]]
            count[name] += 1
    everything = sum(spent.values())
    if by_module:
        print(f"{'CPU s':>8} {'processes':>9}  test module (the processes its tests started)")
        for name, seconds in cpu.most_common(40):
            print(f"{seconds:8.1f} {count[name]:9d}  {name}")
        print(f"{sum(cpu.values()):8.1f} {sum(count.values()):9d}  in all, of {everything:.1f} CPU s counted")
        return
    print(f"{'CPU s':>8} {'share':>6} {'processes':>9} {'per process':>11}  kind")
    for name, seconds in cpu.most_common():
        print(f"{seconds:8.1f} {seconds / everything:6.1%} {count[name]:9d} {seconds / count[name]:11.2f}  {name}")
    rest = everything - sum(cpu.values())
    print(f"{rest:8.1f} {rest / everything:6.1%} {'':9} {'':11}  not Python (Chromium, Node, redis, shells ...)")
    print(f"{everything:8.1f} in all (every process that ended while accounting was on)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("hook", "unhook"):
        commands.add_parser(name).add_argument("venv", type=Path)
    reporting = commands.add_parser("report")
    reporting.add_argument("accounting", type=Path, help="dump-acct's output")
    reporting.add_argument("spawns", type=Path, help="the hook's log ($SPAWNLOG)")
    reporting.add_argument("--by-module", action="store_true", help="per test module instead of per kind")
    args = parser.parse_args()
    if args.command == "report":
        report(args.accounting, args.spawns, args.by_module)
        return
    packages = site_packages(args.venv)
    module, pth = packages / "_suite_cpu_hook.py", packages / "zz_suite_cpu_hook.pth"
    if args.command == "hook":
        module.write_text(HOOK)
        pth.write_text("import _suite_cpu_hook\n")
    else:
        module.unlink(missing_ok=True)
        pth.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
