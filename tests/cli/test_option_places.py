"""`--db` and `--config` after the command name (`add notes --db kb`, as haiku.rag's CLI takes them),
parsed in-process: the slow tier runs them for real (tests/cli/test_commands.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcp_analysis.cli.app import app


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})  # a long tmp path unwrapped
    return result.exit_code, " ".join(result.stderr.replace("│", " ").split())


@pytest.mark.parametrize("command", [["list"], ["add", "notes"], ["sync", "notes"], ["search", "q"], ["info"]])
def test_two_different_knowledge_bases_are_refused_before_anything_is_made(tmp_path: Path, command: list[str]) -> None:
    before, after = tmp_path / "a.lancedb", tmp_path / "b.lancedb"
    code, said = invoke("--db", str(before), *command, "--db", str(after))
    assert code == 2
    assert f"--db: given before the command as {before} and after it as {after}; give it once" in said
    assert not before.exists() and not after.exists()


def test_a_config_file_after_the_command_is_the_one_read(tmp_path: Path) -> None:
    missing = tmp_path / "after.yaml"
    code, said = invoke("list", "--config", str(missing))
    assert code == 1 and f"Config file {missing} does not exist" in said
    code, said = invoke("-c", str(tmp_path / "before.yaml"), "info", "-c", str(missing))
    assert code == 2 and "--config: given before the command as" in said


def test_the_help_of_a_command_shows_the_options_it_takes_whole() -> None:
    result = CliRunner().invoke(app, ["add", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--db" in result.stdout and "--config" in result.stdout
    assert "mcp-analysis[ray]" in result.stdout  # not eaten as markup


def test_haiku_rags_serve_forms_get_what_they_mean_here() -> None:
    code, said = invoke("serve", "--mcp")
    assert code == 2 and "haiku.rag's `serve --mcp` served HTTP: here that is `serve --http`" in said
    code, said = invoke("serve", "--http", "--stdio")
    assert code == 2 and "--http and --stdio are two transports: give one" in said


@pytest.mark.parametrize(("theirs", "ours"), [("delete", "rm"), ("ask", "analyze")])
def test_haiku_rags_command_names_are_ours_under_another_name(theirs: str, ours: str) -> None:
    def words(*args: str) -> list[str]:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return result.stdout.replace("─", " ").replace("│", " ").split()

    assert [ours if word == theirs else word for word in words(theirs, "--help")] == words(ours, "--help")
    assert theirs not in words("--help")  # not listed: one name per command in the help
