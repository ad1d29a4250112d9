"""Hostile config and tokens files: an alias bomb is refused, and no error shows an expanded ${VAR}."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.config import load_settings
from tests.conftest import run_cli


def alias_bomb(levels: int = 9) -> list[str]:
    """YAML anchors nested `levels` deep, each referring 9 times to the one before: 9**levels leaves."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return lines


@pytest.mark.parametrize(
    "name, text, flag",
    [
        ("haiku.rag.yaml", "\n".join(alias_bomb()) + "\nanalysis:\n  model: *l8\n", "--config"),
        ("mcp-analysis.yaml", "storage_options:\n" + "\n".join("  " + line for line in alias_bomb()), "--config"),
        ("tokens.yaml", "\n".join(alias_bomb()) + "\ntokens: [{name: *l8, token: abcdefghijklmnopq}]", "--tokens-file"),
    ],
)
def test_a_yaml_alias_bomb_is_refused(sample_db: Path, tmp_path: Path, name: str, text: str, flag: str) -> None:
    # A few hundred bytes of anchors expand to 387 million values: loaded whole, the config
    # (expanding ${VAR}s, validating) or the tokens file would never finish and grow without bound.
    path = tmp_path / name
    path.write_text(text)
    args = [flag, str(path), "info"] if flag == "--config" else ["serve", "--http", "--port", "1", flag, str(path)]
    run = run_cli("--db", str(sample_db), *args, env={"XDG_DATA_HOME": str(tmp_path)}, timeout=60)
    assert run.returncode == 1, run.stderr[-500:]
    assert f"{path} expands to more than 100,000 values" in run.stderr and "anchors" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "text",
    [
        "analysis:\n  model: {name: '${HOS_TEST_SECRET}'}\n",
        "embeddings:\n  model: {provider: '', name: '${HOS_TEST_SECRET}'}\n",
        "analysis: '${HOS_TEST_SECRET}'\nlancedb: {uri: /tmp/x}\n",
    ],
)
def test_config_errors_never_show_expanded_environment_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # ${VAR} references are expanded before the file is checked, so an error quoting the value
    # would put the variable's secret on stderr (and into logs): errors describe, never quote.
    from mcp_analysis.errors import ConfigError

    monkeypatch.setenv("HOS_TEST_SECRET", "sk-do-not-print-0123456789")
    path = tmp_path / "haiku.rag.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config=path)
    assert "sk-do-not-print" not in str(caught.value), caught.value
    assert str(path) in str(caught.value)
