"""Which files of a watched folder are followed: gitignore-style patterns, hidden and temp files."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.errors import AnalysisError
from mcp_analysis.watch.rules import FileRules, check_folders, relative_to_any


def test_hidden_and_editor_temp_files_are_never_followed_by_default() -> None:
    rules = FileRules()
    for name in (
        ".notes.md",
        ".git/HEAD",
        "sub/.cache/a.md",
        "a.md~",
        "#a.md#",
        ".#a.md",
        "~$report.docx",
        "a.md.swp",
        "4913",
        "download.pdf.part",
        "x.crdownload",
        "draft.tmp",
    ):
        assert not rules.follows(Path(name)), name
    for name in ("a.md", "sub/report.pdf", "README", "notes~old.md"):
        assert rules.follows(Path(name)), name


def test_hidden_files_can_be_followed_when_asked() -> None:
    rules = FileRules(hidden=True)
    assert rules.follows(Path(".notes.md"))
    assert not rules.follows(Path(".notes.md~"))  # temp files stay ignored


def test_include_and_ignore_are_gitignore_patterns() -> None:
    rules = FileRules(include=["*.md", "reports/**/*.pdf"], ignore=["drafts/", "*.private.md", "!keep.private.md"])
    assert rules.follows(Path("a.md")) and rules.follows(Path("deep/er/b.md"))
    assert rules.follows(Path("reports/2025/q1.pdf"))
    assert not rules.follows(Path("other/q1.pdf"))  # not included
    assert not rules.follows(Path("drafts/a.md")) and rules.ignored(Path("drafts/x"))
    assert not rules.follows(Path("secret.private.md"))
    assert rules.follows(Path("keep.private.md"))  # negation, as in .gitignore


def test_paths_are_placed_in_their_watched_folder(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert relative_to_any(a / "x" / "y.md", [a, b]) == (a, Path("x/y.md"))
    assert relative_to_any(tmp_path / "ab" / "y.md", [a, b]) is None  # a sibling sharing a prefix is outside


def test_missing_folders_and_files_are_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(AnalysisError, match="does not exist"):
        check_folders([tmp_path / "nope"])
    with pytest.raises(AnalysisError, match="is a file, not a folder"):
        check_folders([tmp_path / "file.md"])
    with pytest.raises(AnalysisError, match="No folder to watch"):
        check_folders([])
    assert check_folders([tmp_path, tmp_path]) == [tmp_path.resolve()]
