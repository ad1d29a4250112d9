"""Which files of a watched folder are followed: gitignore-style include/ignore patterns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pathspec

from mcp_analysis.errors import AnalysisError
from mcp_analysis.ingest.secrets import named_secret

# Files editors, office suites and browsers write while saving or downloading: never documents.
EDITOR_TEMP_PATTERNS = (
    "*~",
    r"\#*#",  # Emacs auto-save (a leading "#" would start a comment)
    ".#*",
    "*.swp",
    "*.swo",
    "*.swx",
    "4913",  # vim's probe for a writable folder
    "~$*",  # Microsoft Office owner files
    ".~lock.*#",  # LibreOffice lock files
    "*.tmp",
    "*.temp",
    "*.part",
    "*.crdownload",
    "*.download",
)


class FileRules:
    """Decides, for a path relative to its watched folder, whether it is followed."""

    def __init__(self, include: Sequence[str] = (), ignore: Sequence[str] = (), hidden: bool = False) -> None:
        self.include = pathspec.GitIgnoreSpec.from_lines(list(include)) if include else None
        self.ignore = pathspec.GitIgnoreSpec.from_lines([*EDITOR_TEMP_PATTERNS, *ignore])
        self.hidden = hidden

    def ignored(self, relative: Path) -> bool:
        """Hidden, an editor temp file, or matched by watch.ignore (files and folders alike)."""
        if not relative.parts:
            return False
        if not self.hidden and any(part.startswith(".") for part in relative.parts):
            return True
        return self.ignore.match_file(relative.as_posix())

    def follows(self, relative: Path) -> bool:
        """A file is followed when it is not ignored, has no secret's name (ingest/secrets.py: a file's,
        as `add` leaves out; a folder so named is entered) and watch.include (if set) matches it."""
        if self.ignored(relative) or named_secret(relative) is not None:
            return False
        return self.include is None or self.include.match_file(relative.as_posix())


def relative_to_any(path: Path, folders: Sequence[Path]) -> tuple[Path, Path] | None:
    """(folder, path relative to it) for the first watched folder holding `path`, else None."""
    for folder in folders:
        if path == folder or path.is_relative_to(folder):
            return folder, path.relative_to(folder)
    return None


def check_folders(folders: Iterable[Path | str]) -> list[Path]:
    """The folders as absolute, resolved paths; a missing one or a file is a clear error."""
    resolved: list[Path] = []
    for raw in folders:
        folder = Path(raw).expanduser()
        if not folder.is_dir():
            what = "is a file, not a folder" if folder.exists() else "does not exist"
            raise AnalysisError(f"Cannot watch {folder}: it {what}. Give folders (--watch DIR, watch.directories).")
        resolved.append(folder.resolve())
    if not resolved:
        raise AnalysisError("No folder to watch: give one or more DIR arguments (or set watch.directories).")
    return list(dict.fromkeys(resolved))
