from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_analysis.config import DEFAULT_EMBEDDER, load_settings
from mcp_analysis.errors import ConfigError
from tests.conftest import docs_block


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for key in ("MCP_ANALYSIS_DB", "HAIKU_RAG_DB", "MCP_ANALYSIS_CONFIG", "MCP_ANALYSIS_SEARCH__LIMIT"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def test_defaults(in_tmp: Path) -> None:
    s = load_settings()
    assert s.search.limit == 5
    assert s.search.max_context_chars == 5000
    assert s.sandbox.code_timeout == 60
    assert s.sandbox.max_output_chars == 50_000
    assert s.embedder == DEFAULT_EMBEDDER
    assert s.db.name == "kb.lancedb"


def test_precedence_flag_env_file(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (in_tmp / "mcp-analysis.yaml").write_text("db: /from/file\nsearch:\n  limit: 7\n  max_context_chars: 900\n")
    s = load_settings()
    assert s.db == Path("/from/file")
    assert (s.search.limit, s.search.max_context_chars) == (7, 900)

    monkeypatch.setenv("HAIKU_RAG_DB", "/from/haiku")
    assert load_settings().db == Path("/from/haiku")

    monkeypatch.setenv("MCP_ANALYSIS_DB", "/from/env")
    monkeypatch.setenv("MCP_ANALYSIS_SEARCH__LIMIT", "9")
    s = load_settings()
    assert s.db == Path("/from/env")
    assert s.search.limit == 9
    assert s.search.max_context_chars == 900  # the file still fills what env does not set

    s = load_settings(db=Path("/from/flag"), search={"limit": 3})
    assert s.db == Path("/from/flag")
    assert s.search.limit == 3
    assert s.search.max_context_chars == 900


def test_explicit_config_file_and_env_pointer(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = in_tmp / "other.yaml"
    other.write_text("sandbox:\n  code_timeout: 5\n")
    assert load_settings(other).sandbox.code_timeout == 5
    monkeypatch.setenv("MCP_ANALYSIS_CONFIG", str(other))
    assert load_settings().sandbox.code_timeout == 5
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(in_tmp / "missing.yaml")


def test_unknown_keys_are_named(in_tmp: Path) -> None:
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  limitt: 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'search\.limitt'"):
        load_settings()
    (in_tmp / "mcp-analysis.yaml").write_text("colour: blue\n")
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_settings()


def test_bad_values_and_yaml(in_tmp: Path) -> None:
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  limit: 0\n")
    with pytest.raises(ConfigError, match=r"search\.limit"):
        load_settings()
    (in_tmp / "mcp-analysis.yaml").write_text("search: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings()
    (in_tmp / "mcp-analysis.yaml").write_text("embedder: nocolon\n")
    with pytest.raises(ConfigError, match="provider:model"):
        load_settings()


def test_embedder_explicitness_is_tracked(in_tmp: Path) -> None:
    assert "embedder" not in load_settings().model_fields_set
    assert "embedder" in load_settings(embedder="onnx:all-MiniLM-L6-v2-exact").model_fields_set


def test_the_documented_sample_lists_every_setting_with_its_default(in_tmp: Path) -> None:
    """docs/configuration.md's sample is the reference users copy: every key, the real defaults."""
    page = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    sample = page.split("```yaml", 1)[1].split("```", 1)[0]
    (in_tmp / "sample.yaml").write_text(sample)
    shown = yaml.safe_load(sample)
    defaults = load_settings(db="/srv/kb.lancedb").model_dump(mode="json")

    def keys(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            if isinstance(value, dict) and value:
                out.update(keys(value, f"{prefix}{key}."))
            else:
                out[prefix + key] = value
        return out

    assert keys(shown) == keys(defaults)
    assert load_settings(in_tmp / "sample.yaml").model_dump(mode="json") == defaults


def test_a_shared_store_with_persistence_off_is_refused(in_tmp: Path) -> None:
    """`sessions.persist: false` cannot be honoured by replicas sharing a store: say so, never ignore it."""
    shared = {"store": "redis://127.0.0.1:6379/0", "secret": "s" * 32}
    with pytest.raises(ConfigError, match=r"sessions\.persist is false but sessions\.store is set"):
        load_settings(sessions={**shared, "persist": False})
    assert load_settings(sessions=shared).sessions.persist is True
    assert load_settings(sessions={"persist": False}).sessions.store is None


def test_load_settings_takes_a_config_path_as_text(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("search: {limit: 7}\n")
    assert load_settings(str(config)).search.limit == 7


def test_the_configuration_sample_loads_as_is(tmp_path: Path) -> None:
    config = tmp_path / "mcp-analysis.yaml"
    config.write_text(docs_block("configuration.md", "yaml"))
    settings = load_settings(config)
    assert settings.db == Path("/srv/kb.lancedb")
    # The sample spells out the defaults: nothing else differs from an empty config.
    defaults = load_settings(None).model_dump(mode="json")
    assert {**settings.model_dump(mode="json"), "db": defaults["db"]} == defaults


@pytest.mark.parametrize("bound", [0, 2, 4])
def test_a_vector_segment_bound_of_one_is_refused_as_one_that_could_never_hold(in_tmp: Path, bound: int) -> None:
    """A merge leaves the first segment and one more: 1 is refused naming the setting, 0 and 2+ load."""
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  vector_index_max_segments: 1\n")
    with pytest.raises(ConfigError, match=r"search\.vector_index_max_segments.*0 \(never merge\) or at least 2"):
        load_settings()
    (in_tmp / "mcp-analysis.yaml").write_text(f"search:\n  vector_index_max_segments: {bound}\n")
    assert load_settings().search.vector_index_max_segments == bound


def test_a_post_filter_share_near_zero_is_refused_naming_the_setting(in_tmp: Path) -> None:
    """The unfiltered legs fetch candidates / share rows: a share near 0 would fetch the whole table."""
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  post_filter_min_share: 0\n")
    with pytest.raises(ConfigError, match=r"search\.post_filter_min_share"):
        load_settings()
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  post_filter_min_share: 0.05\n")
    assert load_settings().search.post_filter_min_share == 0.05


def test_the_sampled_vector_legs_bound_reaches_the_store_from_a_config_file(in_tmp: Path) -> None:
    from mcp_analysis.search.hybrid import view_legs

    assert view_legs(load_settings().search).sample_min_chunks == 500_000
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  sampled_vector_min_chunks: 0\n")
    assert view_legs(load_settings().search).sample_min_chunks == 0
    (in_tmp / "mcp-analysis.yaml").write_text("search:\n  sampled_vector_min_chunks: -1\n")
    with pytest.raises(ConfigError, match=r"search\.sampled_vector_min_chunks"):
        load_settings()
