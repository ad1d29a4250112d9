"""The embedder runs offline: onnxruntime leaves no usage telemetry behind unless the user opts in."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, shared_model_cache

cli = run_cli


def test_the_embedder_leaves_no_telemetry_behind(sample_db: Path, tmp_path: Path) -> None:
    """onnxruntime 1.32 on Linux queues usage telemetry for Microsoft's collector (a device id and
    events in ~/.cache/Microsoft/DeveloperTools/.onnxruntime, uploaded when a network is there).
    "Everything runs offline" means we opt out; a user may still opt in with ORT_DISABLE_TELEMETRY=0."""
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(shared_model_cache(tmp_path))}
    found = cli("--db", str(sample_db), "search", "phishing", "--json", env=env, unset=["ORT_DISABLE_TELEMETRY"])
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)  # the embedder ran
    assert not list(tmp_path.rglob("DeveloperTools")), sorted(tmp_path.rglob("*"))
