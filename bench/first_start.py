"""How long a new user's first `initialize` takes: a fresh clone, an empty home, `uv run` starting the server.

Each run copies the committed tree (`git archive HEAD`, no .venv) to a new folder, gives it an
empty HOME, and starts the README's command (`python3 -m uv run mcp-analysis --sample serve`) as
an MCP host would; the clock runs until the server answers `initialize`, which waits for uv to
create `.venv` and install the packages. With `--cold`, uv's cache is a new empty folder too, so
every package is downloaded from the index (a fresh machine); without it the machine's uv cache
is used (a second clone). The sample's build runs after `initialize`, in the background, and is
not counted. A second start in the same clone (`.venv` made) shows how much of the first was
uv's install.

    python3 bench/first_start.py [--runs 3] [--cold]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent


def fresh_clone(folder: Path) -> Path:
    clone = folder / "mcp-analysis"
    clone.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(clone)], input=archive, check=True)
    return clone


async def first_initialize(clone: Path, home: Path, cache: Path | None) -> tuple[float, float]:
    """Seconds to `initialize` and then to `tools/list`, from launching the command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_", "MCP_ANALYSIS"))}
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")})
    if cache is not None:
        env["UV_CACHE_DIR"] = str(cache)
    params = StdioServerParameters(
        command="python3", args=["-m", "uv", "run", "mcp-analysis", "--sample", "serve"], env=env, cwd=str(clone)
    )
    started = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        initialized = time.perf_counter() - started
        await client.list_tools()
        return initialized, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="an empty uv cache: every package downloaded")
    options = parser.parse_args()
    if shutil.which("python3") is None or subprocess.run(["python3", "-m", "uv", "--version"]).returncode:
        sys.exit("needs python3 with uv (python3 -m pip install uv)")
    timings, again = [], []
    for run in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="first-start-") as folder:
            root = Path(folder)
            clone, home = fresh_clone(root), root / "home"
            home.mkdir()
            cache = root / "uv-cache" if options.cold else None
            initialized, listed = anyio.run(first_initialize, clone, home, cache)
            second, _ = anyio.run(first_initialize, clone, home, cache)
            timings.append(initialized)
            again.append(second)
            print(
                f"run {run + 1}: initialize {initialized:.1f} s, tools/list {listed:.1f} s; "
                f"second start {second:.1f} s",
                flush=True,
            )
    kind = "empty uv cache (fresh machine)" if options.cold else "the machine's uv cache (a second clone)"
    print(
        f"first initialize with {kind}: median {statistics.median(timings):.1f} s, "
        f"range {min(timings):.1f}-{max(timings):.1f} s over {len(timings)} runs; a second start: "
        f"{min(again):.1f}-{max(again):.1f} s"
    )


if __name__ == "__main__":
    main()
