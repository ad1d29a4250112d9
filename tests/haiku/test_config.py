"""`--config haiku.rag.yaml`: the parts that matter are used, the rest ignored with a note."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.errors import ConfigError
from tests.conftest import run_cli
from tests.haiku_db import copy_fixture

THEIR_CONFIG = """\
environment: production
storage:
  data_dir: {data_dir}
  auto_vacuum: false
embeddings:
  model:
    provider: sentence-transformers
    name: sentence-transformers/all-MiniLM-L6-v2
    vector_dim: 384
  batch_size: 64
qa:
  model: {{provider: ollama, name: gpt-oss}}
  max_searches: 3
analysis:
  model:
    provider: anthropic
    name: claude-sonnet-4-20250514
    temperature: 0.2
  code_timeout: 30.0
  max_output_chars: 20000
  max_executions: 7
search:
  limit: 8
  max_context_chars: 3000
  vector_refine_factor: 30
processing:
  chunk_size: 512
"""


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for key in ("MCP_ANALYSIS_DB", "HAIKU_RAG_DB", "MCP_ANALYSIS_CONFIG", "OLLAMA_BASE_URL", "HAIKU_RAG_CONFIG_PATH"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def test_their_config_maps_onto_ours_and_notes_the_rest(in_tmp: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = in_tmp / "haiku.rag.yaml"
    path.write_text(THEIR_CONFIG.format(data_dir=in_tmp / "data"))
    with caplog.at_level(logging.WARNING):
        s = load_settings(path)
    assert s.analysis.model == "anthropic:claude-sonnet-4-20250514"
    assert (s.sandbox.code_timeout, s.sandbox.max_output_chars, s.analysis.max_executions) == (30.0, 20000, 7)
    assert s.embedder == "onnx:all-MiniLM-L6-v2-exact" and "embedder" in s.model_fields_set
    assert (s.search.limit, s.search.max_context_chars) == (8, 3000)
    assert s.db == in_tmp / "data" / "haiku.rag.lancedb"  # haiku.rag's default database location
    notes = [r.getMessage() for r in caplog.records if "reading it as a haiku.rag config" in r.getMessage()]
    assert len(notes) == 1
    for ignored in (
        "environment",
        "storage.auto_vacuum",
        "embeddings.batch_size",
        "qa",
        "model.temperature",
        "search.vector_refine_factor",
        "processing",
    ):
        assert ignored in notes[0]
    assert "storage.data_dir," not in notes[0].split("(it uses")[0]
    used = notes[0].split("(it uses")[1]  # every key read is named, the fallback and the Ollama URL too
    assert "qa.model when analysis.model is not set" in used and "providers.ollama.base_url" in used


def test_qa_model_fallback_and_ollama_urls(in_tmp: Path) -> None:
    path = in_tmp / "rag.yaml"  # any name: haiku.rag-only sections make it a haiku.rag config
    path.write_text(
        "qa:\n  model: {provider: ollama, name: qwen3}\n"
        "embeddings:\n  model: {provider: ollama, name: nomic-embed-text, vector_dim: 768}\n"
        "providers:\n  ollama: {base_url: 'http://gpu-box:11434'}\n"
        "lancedb:\n  uri: ${KB_URI:-/srv/kb.lancedb}\n"
    )
    s = load_settings(path)
    assert (s.analysis.model, s.analysis.base_url) == ("ollama:qwen3", "http://gpu-box:11434")
    assert (s.embedder, s.embedder_base_url) == ("ollama:nomic-embed-text", "http://gpu-box:11434")
    assert s.db == Path("/srv/kb.lancedb")


def test_env_references_and_precedence(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = in_tmp / "haiku.rag.yaml"
    path.write_text("storage:\n  data_dir: ${KB_HOME}\nanalysis:\n  code_timeout: 12\n")
    with pytest.raises(ConfigError, match=r"\$\{KB_HOME\}, which is unset"):
        load_settings(path)
    monkeypatch.setenv("KB_HOME", str(in_tmp / "home"))
    assert load_settings(path).db == in_tmp / "home" / "haiku.rag.lancedb"
    monkeypatch.setenv("HAIKU_RAG_DB", "/from/haiku/env")
    assert load_settings(path).db == Path("/from/haiku/env")
    assert load_settings(path, db=Path("/from/flag")).db == Path("/from/flag")
    assert load_settings(path).sandbox.code_timeout == 12


def test_formats_are_never_mixed_and_ours_stays_strict(in_tmp: Path) -> None:
    mixed = in_tmp / "mcp-analysis.yaml"
    mixed.write_text("db: /kb\nembeddings:\n  model: {provider: ollama, name: x}\n")
    with pytest.raises(ConfigError, match=r"mixes mcp-analysis settings \(db\) with haiku\.rag ones \(embeddings\)"):
        load_settings(mixed)
    ours = in_tmp / "ours.yaml"
    ours.write_text("search:\n  limt: 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'search\.limt'"):
        load_settings(ours)


def test_the_command_line_reads_their_config_and_database(tmp_path: Path) -> None:
    db = copy_fixture(tmp_path / "data" / "haiku.rag.lancedb")
    config = tmp_path / "haiku.rag.yaml"
    config.write_text(THEIR_CONFIG.format(data_dir=tmp_path / "data"))
    result = run_cli(
        "--config",
        str(config),
        "search",
        "Mozilla Public License",
        "--json",
        unset=["MCP_ANALYSIS_DB", "HAIKU_RAG_DB"],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "note: " in result.stderr and "processing" in result.stderr and "Traceback" not in result.stderr
    hits = json.loads(result.stdout)
    assert hits and "MPL" in hits[0]["document_uri"] and db.exists()


_LOAD_AND_REPORT = """\
import json, sys
from mcp_analysis.config import load_settings
settings = load_settings(sys.argv[1])
heavy = [name for name in ("numpy", "pydantic_ai", "onnxruntime", "lancedb", "pyarrow") if name in sys.modules]
print(json.dumps({"embedder": settings.embedder, "db": str(settings.db), "heavy": heavy}))
"""


def test_reading_their_config_loads_no_model_library(in_tmp: Path) -> None:
    """Settings are read at start-up: mapping their embedder record imports no numpy, pydantic-ai or onnxruntime."""
    path = in_tmp / "haiku.rag.yaml"
    path.write_text(THEIR_CONFIG.format(data_dir=in_tmp / "data"))
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_REPORT, str(path)], cwd=in_tmp, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["embedder"] == "onnx:all-MiniLM-L6-v2-exact"  # their record went through the embedder mapping
    assert report["db"] == str(in_tmp / "data" / "haiku.rag.lancedb")
    assert report["heavy"] == []
