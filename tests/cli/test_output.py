"""What the CLI prints for people: tables that fit the terminal, search passages around the match."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import REPO, run_cli

cli = run_cli


def test_list_shows_each_uri_after_the_prefix_they_share(sample_db: Path) -> None:
    """On an 80-column terminal the prefix all uris share is said once, so no uri is cut to the same `file:///...…`."""
    table = cli("--db", str(sample_db), "list", env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    documents = REPO / "mcp_analysis" / "sample" / "documents"
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    assert f"uriafter{documents.as_uri()}/" in "".join(table.stdout.split())  # said once
    uris: list[str] = []  # the uri column, its folded lines joined
    for line in table.stdout.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.split("│")[1:-1]]
            if cells[0]:
                uris.append(cells[2])
            else:
                uris[-1] += cells[2]
    assert sorted(uris) == sorted(p.name for p in documents.iterdir())  # every sample file, none cut


def test_search_shows_the_passage_around_the_match(tmp_path: Path) -> None:
    """Each hit prints the passage around the match, not its whole grown section (pages of text for
    `search ... --limit 3`), and says how to see more."""
    docs = tmp_path / "docs"
    docs.mkdir()
    filler = "The harbour board met again and went through the usual business of the quarter. " * 6
    for n in range(3):
        paragraphs = [f"{filler}Item {n}.{k} was noted." for k in range(8)]
        paragraphs[5] = f"The tide gauge at berth {n} drifted by {n + 3} centimetres after the storm surge."
        (docs / f"minutes-{n}.md").write_text(f"# Minutes {n}\n\n## Business\n\n" + "\n\n".join(paragraphs) + "\n")
    db = str(tmp_path / "kb.lancedb")
    assert cli("--db", db, "add", str(docs)).returncode == 0
    query = "tide gauge drift after the storm surge"
    # Passages grown to whole sections (search.rerank off): the case where printing a passage
    # whole would cost pages; the default's per-chunk passages are shorter still.
    env = {"MCP_ANALYSIS_SEARCH__RERANK": "false"}
    whole = json.loads(cli("--db", db, "search", query, "-n", "3", "--json", env=env).stdout)
    assert len(whole) == 3 and all(len(h["content"]) > 2000 for h in whole)
    human = cli("--db", db, "search", query, "-n", "3", env=env)
    assert human.returncode == 0, human.stderr
    passages = re.split(r"^─+ \d\. .*$", human.stdout, flags=re.MULTILINE)[1:]
    assert len(passages) == 3
    assert all(len(p) < 1200 and "tide gauge" in p for p in passages), [len(p) for p in passages]
    assert "--context 3600 shows more" in passages[-1]  # and says how to see more
    wide = cli("--db", db, "search", query, "-n", "3", "--context", "100000", env=env)
    assert all(h["content"].strip().splitlines()[-1] in wide.stdout for h in whole)
