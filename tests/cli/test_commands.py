"""The command line, run as real processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcp_analysis.sample import documents_dir
from tests.conftest import REPO, run_cli
from tests.docs_factory import write_all

cli = run_cli


def test_add_list_search_info_exec_rm(tmp_path: Path) -> None:
    write_all(tmp_path / "docs")
    db = str(tmp_path / "kb.lancedb")
    added = cli("--db", db, "add", str(tmp_path / "docs"), "--meta", "team=harbour", "--json")
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert len(report["added"]) == 6 and report["skipped"] == []

    listed = json.loads(cli("--db", db, "list", "--json").stdout)
    assert len(listed) == 6 and all(d["metadata"]["team"] == "harbour" for d in listed)
    # A --meta key is no column: the error offers the filter that finds it, and that filter does.
    by_key = cli("--db", db, "list", "--filter", "team = 'harbour'")
    assert by_key.returncode == 1 and 'metadata LIKE \'%"team": "value"%\'' in by_key.stderr, by_key.stderr
    offered = 'metadata LIKE \'%"team": "harbour"%\''
    assert len(json.loads(cli("--db", db, "list", "--filter", offered, "--json").stdout)) == 6
    only_pdf = json.loads(cli("--db", db, "list", "--filter", "uri LIKE '%.pdf'", "--json").stdout)
    assert [d["title"] for d in only_pdf] == ["Dredging Survey"]

    found = json.loads(cli("--db", db, "search", "sediment near the quay", "--limit", "2", "--json").stdout)
    assert found[0]["document_title"] == "Dredging Survey" and 2 in found[0]["page_numbers"]
    human = cli("--db", db, "search", "bosun", "-n", "1")
    assert human.returncode == 0 and "Crew Roster" in human.stdout

    # --db after the command too, as haiku.rag's CLI takes it (tests/cli/test_option_places.py: both places).
    info = json.loads(cli("info", "--json", "--db", db).stdout)
    assert info["documents"] == 6 and info["embedder"] == "onnx:all-MiniLM-L6-v2" and info["vector_dim"] == 384
    assert any("FTS" in ix for ix in info["indexes"]["chunks"])

    ran = cli("--db", db, "exec", "import os\nprint('n =', len(os.listdir('/documents')))\n'done'")
    assert ran.returncode == 0 and ran.stdout == "n = 6\n'done'\n"
    script = tmp_path / "count.py"
    script.write_text("docs = await list_documents()\nsorted(d['title'] for d in docs)[0]")
    from_file = cli("--db", db, "exec", "-f", str(script), "--filter", "uri LIKE '%.md'")
    assert from_file.stdout.strip() == "'Harbour Log'"
    from_stdin = cli("--db", db, "exec", "-f", "-", "--json", stdin="1 + 1")
    assert json.loads(from_stdin.stdout)["value"] == "2"
    failing = cli("--db", db, "exec", "1 / 0")
    assert failing.returncode == 1 and "ZeroDivisionError" in failing.stderr

    removed = cli("rm", str(tmp_path / "docs" / "notice.txt"), "--db", db)
    assert removed.returncode == 0 and "Notice to Mariners" in removed.stdout
    note = " ".join(removed.stderr.split())
    assert f"{tmp_path / 'docs' / 'notice.txt'} still exists: a `sync` or `serve --watch` of its folder adds" in note
    assert len(json.loads(cli("--db", db, "list", "--json").stdout)) == 5

    # The ids `list` shows on an 80-column terminal are accepted by `rm`.
    table = cli("--db", db, "list", env={"COLUMNS": "80"})
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    wide = cli("--db", db, "list", env={"COLUMNS": "200"}).stdout  # what --meta gave, in a column of its own
    assert "metadata" in wide.splitlines()[1] and wide.count("team=harbour") == 5
    shown = re.findall(r"^│ ([0-9a-f-]+) +│", table.stdout, flags=re.MULTILINE)
    full_ids = {d["id"] for d in json.loads(cli("--db", db, "list", "--json").stdout)}
    assert len(shown) == 5 and all(len(i) >= 8 and sum(f.startswith(i) for f in full_ids) == 1 for i in shown)
    by_prefix = cli("--db", db, "rm", shown[0])
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert by_prefix.stdout.startswith(f"removed {shown[0]}")
    assert len(json.loads(cli("--db", db, "list", "--json").stdout)) == 4


def test_add_exits_nonzero_naming_the_files_it_could_not_add(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "log.md").write_text("# Harbour Log\n\nThe pilot boarded at dawn.\n")
    (docs / "photo.heic").write_bytes(b"\x00\x00\x00\x18ftypheic" + b"\x00" * 50)
    db = str(tmp_path / "kb.lancedb")
    human = cli("--db", db, "add", str(docs))
    assert human.returncode == 1
    assert f"skipped {docs / 'photo.heic'}: unsupported file type '.heic'" in human.stderr
    assert human.stdout.startswith("1 added, 0 replaced, 0 unchanged, 1 skipped")
    assert "1 path(s) could not be added" in human.stderr
    as_json = cli("--db", db, "add", str(docs), "--json")
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and report["unchanged"] and report["skipped"][0][0].endswith("photo.heic")
    # All good: exit 0 (the markdown file again is unchanged, which is success).
    assert cli("--db", db, "add", str(docs / "log.md")).returncode == 0


def test_errors_are_one_line_and_nonzero(tmp_path: Path) -> None:
    missing = cli("--db", str(tmp_path / "nope.lancedb"), "search", "x")
    assert missing.returncode == 1 and missing.stderr.startswith("error: No knowledge base at")
    assert "Traceback" not in missing.stderr

    (tmp_path / "mcp-analysis.yaml").write_text("search:\n  limitt: 3\n")
    bad_config = cli("--config", str(tmp_path / "mcp-analysis.yaml"), "list")
    assert bad_config.returncode == 1 and "unknown setting 'search.limitt'" in bad_config.stderr

    write_all(tmp_path / "docs")
    db = str(tmp_path / "kb.lancedb")
    assert cli("--db", db, "add", str(tmp_path / "docs" / "log.md")).returncode == 0
    bad_filter = cli("--db", db, "list", "--filter", "colour = 'red'")
    assert bad_filter.returncode == 1 and "unknown column 'colour'" in bad_filter.stderr
    bad_meta = cli("--db", db, "add", str(tmp_path / "docs" / "log.md"), "--meta", "novalue")
    assert bad_meta.returncode == 1 and "key=value" in bad_meta.stderr
    mismatch = cli("--db", db, "search", "x", env={"MCP_ANALYSIS_EMBEDDER": "openai:text-embedding-3-small"})
    assert mismatch.returncode == 1 and "was built with embedder 'onnx:all-MiniLM-L6-v2'" in mismatch.stderr


# Each command with a dependency broken underneath it (tests/cli/inject/sitecustomize.py): the
# error must be one line on stderr with the --debug hint and exit code 1, never a traceback.
# (Below KnowledgeBase.open, LanceDB failures are reported as an unreadable database on purpose,
# so the injection point is the knowledge base itself.)
BROKEN_KB = "mcp_analysis.corpus:KnowledgeBase.open"
COMMANDS = [
    pytest.param(["serve"], "mcp_analysis.server.stdio:serve_stdio", id="serve"),
    pytest.param(["add", "{docs}"], BROKEN_KB, id="add"),
    pytest.param(["rm", "0123abcd"], BROKEN_KB, id="rm"),
    pytest.param(["list"], BROKEN_KB, id="list"),
    pytest.param(["search", "revenue"], BROKEN_KB, id="search"),
    pytest.param(["info"], BROKEN_KB, id="info"),
    pytest.param(["exec", "1 + 1"], BROKEN_KB, id="exec"),
    pytest.param(["analyze", "How many documents?"], BROKEN_KB, id="analyze"),
]
INJECT = Path(__file__).resolve().parent / "inject"


def _broken(target: str) -> dict[str, str]:
    return {"PYTHONPATH": str(INJECT), "MCP_ANALYSIS_TEST_BREAK": target}


@pytest.mark.parametrize(("args", "target"), COMMANDS)
def test_unexpected_errors_in_every_command_are_one_line(
    args: list[str], target: str, sample_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kb.lancedb" if args[0] == "add" else sample_db  # never write to the shared sample
    args = [a.format(docs=REPO / "README.md") for a in args]
    result = cli("--db", str(db), *args, env=_broken(target), stdin="")
    assert result.returncode == 1, result
    assert result.stderr.splitlines()[-1] == (
        "error: unexpected RuntimeError: injected failure (run with --debug for the traceback)"
    )
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(sample_db: Path) -> None:
    result = cli("--debug", "--db", str(sample_db), "list", env=_broken(BROKEN_KB))
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr and "RuntimeError: injected failure" in result.stderr


def test_a_blank_provider_key_is_a_one_line_error(sample_db: Path) -> None:
    # A real case: the OpenAI SDK raises its own error type for a blank key; it must not escape as a traceback.
    result = cli("--db", str(sample_db), "analyze", "q", "--model", "openai:gpt-4o", env={"OPENAI_API_KEY": ""})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: Cannot use the analysis model 'openai:gpt-4o' (setting `analysis.model`")
    assert "Missing credentials" in result.stderr
    unreadable = cli("--db", str(sample_db), "exec", "-f", str(REPO / "no-such-script.py"))
    assert unreadable.returncode == 1 and unreadable.stderr.startswith("error: Cannot read the code file")


def test_sample_knowledge_base_is_built_on_first_use(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    first = cli("--sample", "list", "--json", env=env)
    assert first.returncode == 0, first.stderr
    titles = [d["title"] for d in json.loads(first.stdout)]
    names = sorted(p.name for p in documents_dir().iterdir())
    n = len(names)
    assert len(titles) == n and "Report A: Fleet Operator Survey 2025" in titles
    assert (tmp_path / "data" / "mcp-analysis" / "sample.lancedb").is_dir()
    # Every slow step said what it was doing, on stderr: each file by name, counted up to n.
    progress = [line for line in first.stderr.splitlines() if line.startswith("mcp-analysis: ")]
    assert progress[0].startswith("mcp-analysis: Building the sample knowledge base in ")
    per_file = [
        m for line in progress if (m := re.fullmatch(rf"mcp-analysis: sample knowledge base: (\d+)/{n} (\S+)", line))
    ]
    assert sorted(m.group(2) for m in per_file) == names
    assert sorted(int(m.group(1)) for m in per_file) == list(range(1, n + 1))
    assert any(re.search(rf"embedding and writing \d+ chunks of {n} documents", line) for line in progress)
    assert progress[-1].startswith(f"mcp-analysis: Sample knowledge base ready: {n} documents in ")
    again = cli("exec", "--sample", "len(await list_documents())", env=env)  # after the command works too
    assert again.stdout.strip() == str(n) and again.stderr == ""  # built: no progress, no rebuild


def test_control_sequences_in_documents_and_names_never_reach_the_terminal(tmp_path: Path) -> None:
    """A title, a passage or a file name may carry terminal escapes (clear the screen, set the window
    title, write the clipboard with OSC 52): the human-readable output shows them, never sends them."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "esc.md").write_text(
        "# Title\x1b]0;PWNED\x1b\\ here\n\nbody \x1b[2J cleared \x1b]52;c;ZWNobyBwd25lZA==\x1b\\ zebra\n"
    )
    (docs / "bad\x1b[2J.pdf").write_bytes(b"not a pdf at all")
    db = str(tmp_path / "kb.lancedb")
    added = cli("--db", db, "add", str(docs))
    assert added.returncode == 1 and "bad\\x1b[2J.pdf" in added.stderr  # named, and shown
    read = "import os\nopen('/documents/' + os.listdir('/documents')[0] + '/content.txt').read()"
    for args in (("list",), ("search", "zebra", "-n", "1"), ("exec", read)):  # exec's value is its repr
        done = cli("--db", db, *args)
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout + done.stderr, args
    shown = cli("--db", db, "search", "zebra", "-n", "1").stdout
    assert "\\x1b]52;c;" in shown and "\\x1b[2J" in shown
    exact = json.loads(cli("--db", db, "search", "zebra", "-n", "1", "--json").stdout)
    assert "\x1b[2J" in exact[0]["content"]  # JSON keeps the text exact (and escaped by JSON itself)
