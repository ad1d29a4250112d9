"""The command line, run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.docs_factory import write_all


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_analysis", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
        env={**os.environ, **(env or {})},
    )


def test_add_list_search_info_exec_rm(tmp_path: Path) -> None:
    write_all(tmp_path / "docs")
    db = str(tmp_path / "kb.lancedb")
    added = cli("--db", db, "add", str(tmp_path / "docs"), "--meta", "team=harbour", "--json")
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert len(report["added"]) == 6 and report["skipped"] == []

    listed = json.loads(cli("--db", db, "list", "--json").stdout)
    assert len(listed) == 6 and all(d["metadata"]["team"] == "harbour" for d in listed)
    only_pdf = json.loads(cli("--db", db, "list", "--filter", "uri LIKE '%.pdf'", "--json").stdout)
    assert [d["title"] for d in only_pdf] == ["Dredging Survey"]

    found = json.loads(cli("--db", db, "search", "sediment near the quay", "--limit", "2", "--json").stdout)
    assert found[0]["document_title"] == "Dredging Survey" and 2 in found[0]["page_numbers"]
    human = cli("--db", db, "search", "bosun", "-n", "1")
    assert human.returncode == 0 and "Crew Roster" in human.stdout

    info = json.loads(cli("--db", db, "info", "--json").stdout)
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

    removed = cli("--db", db, "rm", str(tmp_path / "docs" / "notice.txt"))
    assert removed.returncode == 0 and "Notice to Mariners" in removed.stdout
    assert len(json.loads(cli("--db", db, "list", "--json").stdout)) == 5


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


def test_sample_knowledge_base_is_built_on_first_use(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    first = cli("--sample", "list", "--json", env=env)
    assert first.returncode == 0, first.stderr
    titles = [d["title"] for d in json.loads(first.stdout)]
    assert len(titles) == 12 and "Report A: Fleet Operator Survey 2025" in titles
    assert (tmp_path / "data" / "mcp-analysis" / "sample.lancedb").is_dir()
    again = cli("exec", "--sample", "len(await list_documents())", env=env)  # after the command works too
    assert again.stdout.strip() == "12"
