"""Shared fixtures: one real sample knowledge base on disk per test run, real embedder, real workers."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_analysis.config import Settings, load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.paths import cache_home
from mcp_analysis.sample import documents_dir, ensure_sample_kb
from tests import schedule
from tests.tiers import (  # noqa: F401  (pytest finds hooks by name here)
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

REPO = Path(__file__).resolve().parent.parent
# The documents the sample knowledge base holds: one per file the package ships.
SAMPLE_DOCUMENTS = sum(1 for p in documents_dir().iterdir() if p.is_file() and not p.name.startswith("."))


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
    stdin: str | None = None,
    timeout: float = 300,
    cwd: Path = REPO,
    launcher: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """`python -m mcp_analysis ARGS` as a user runs it, in a real process from `cwd` (the repo): `env`
    over this process's environment (without `unset`), output captured as text, stdin closed unless given;
    started through `launcher` when given (e.g. `uv run --`)."""
    dropped = set(unset)
    environment = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in dropped}
    feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(
        [*launcher, sys.executable, "-m", "mcp_analysis", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        **feed,
    )


def run_cli_at_once(
    runs: Mapping[Hashable, tuple[Sequence[str], Mapping[str, str]]], timeout: float = 300
) -> dict[Hashable, subprocess.CompletedProcess[str]]:
    """`run_cli(*args, env=env)` for each run, all at once (commands that each wait out an object store's
    retries, seconds that need not add up): their results by the runs' keys, in the runs' order."""
    with ThreadPoolExecutor(max(1, len(runs))) as pool:
        started = {key: pool.submit(run_cli, *args, env=env, timeout=timeout) for key, (args, env) in runs.items()}
        return {key: run.result() for key, run in started.items()}


def shared_model_cache(cache: Path) -> Path:
    """`cache` (an XDG cache folder) made one where the embedding model was prepared before: its
    mcp-analysis/models is this run's model cache. A process started with it then loads the model
    instead of deriving it again (~5 s of CPU, paid again by each server killed before it ended)."""
    shared = cache_home() / "models"
    shared.mkdir(parents=True, exist_ok=True)
    link = cache / "mcp-analysis" / "models"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(shared, target_is_directory=True)
    return cache


def user_home(home: Path) -> Path:
    """`home` made a user's home where the embedding model was prepared before, for a server
    started with HOME=`home` and no XDG_CACHE_HOME (as a host such as Claude Desktop starts it)."""
    shared_model_cache(home / ".cache")
    return home


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(schedule, "tests.schedule")  # the longest modules start first


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: tests/schedule.processes, unless PYTEST_XDIST_AUTO_NUM_WORKERS says (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    usable = getattr(os, "sched_getaffinity", None)  # Linux: the cores this process may run on
    cores = len(usable(0)) if usable else os.cpu_count() or 1
    return schedule.processes(cores, config.getoption("markexpr") or "")


def docs_block(page: str, lang: str = "python") -> str:
    """The first fenced `lang` block of the page docs/`page`."""
    body = (REPO / "docs" / page).read_text()
    return body.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"  # LanceDB's async API does not run under trio


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep tests away from the user's data dir and config; keep the model cache shared."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "MCP_ANALYSIS_CONFIG", "MCP_ANALYSIS_DB", "HAIKU_RAG_DB")}
    os.environ["XDG_DATA_HOME"] = str(home / "data")
    for key in ("MCP_ANALYSIS_CONFIG", "MCP_ANALYSIS_DB", "HAIKU_RAG_DB"):
        os.environ.pop(key, None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that all its xdist workers share (each has a base folder in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def run_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """Hold the run-wide lock `name` (released if the holder dies): -> the run's shared folder."""
    shared = run_folder(tmp_path_factory)
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield shared


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample knowledge base, built once per test run: the first worker to need it builds it,
    the others wait and find it built. Tests read it only (a test that writes copies it)."""
    with run_lock(tmp_path_factory, "sample") as shared:
        db = shared / "sample" / "sample.lancedb"
        anyio.run(ensure_sample_kb, make_settings(db))
    return db


def make_settings(db: Path, **overrides: Any) -> Settings:
    return load_settings(db=db, **overrides)


@pytest.fixture
def sample_settings(sample_db: Path, tmp_path: Path) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})


@pytest.fixture
async def kb(sample_settings: Settings) -> AsyncIterator[KnowledgeBase]:
    base = await KnowledgeBase.open(sample_settings)
    yield base
    await base.close()


@pytest.fixture
def sample_docs_copy(tmp_path: Path) -> Path:
    """A writable copy of the sample documents (for ingest tests that modify files)."""
    target = tmp_path / "docs"
    shutil.copytree(documents_dir(), target)
    return target
