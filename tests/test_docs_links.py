"""Every relative link in the README and the docs pages resolves: the file exists, the #anchor is a heading.

Anchors follow GitHub's rules (github-slugger): the heading's text as rendered, lower-cased,
everything but letters, digits, `_`, `-` and spaces dropped, each space a `-`; a repeated
slug gets `-1`, `-2`, ... Links inside code (fenced blocks, `spans`) are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [REPO / "README.md", REPO / "RELIABILITY.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (lines inside come back empty, keeping numbering)."""
    lines, fence = [], ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
            lines.append("")
        elif match:
            fence = match.group(1)
            lines.append("")
        else:
            lines.append(line)
    return lines


def rendered(heading: str) -> str:
    """A heading's text as GitHub shows it: no link targets, code marks, emphasis or HTML tags."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = _CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("**", "").replace("*", "")


def slug(text: str) -> str:
    return re.sub(r"[^\w\- ]", "", rendered(text).strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (repeats numbered) and HTML name/id anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    lines = prose_lines(text)
    for number, line in enumerate(lines):
        match = _HEADING.match(line)
        title = match.group(2) if match else None
        if title is None and number > 0 and lines[number - 1].strip() and _SETEXT.match(line):
            previous = lines[number - 1]
            if not _HEADING.match(previous) and not previous.lstrip().startswith(("-", "*", ">", "|")):
                title = previous.strip()
        if title is not None:
            base = slug(title)
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(a.lower() for a in _HTML_ANCHOR.findall(line))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link and image outside code."""
    found = []
    for number, line in enumerate(prose_lines(text), start=1):
        line = _CODE_SPAN.sub("", line)
        found += [(number, target) for target in _INLINE_LINK.findall(line)]
        reference = _REFERENCE.match(line)
        if reference:
            found.append((number, reference.group(1)))
    return found


def broken_links(page: Path, root: Path) -> list[str]:
    """What is wrong with each relative link of `page` (files must stay inside `root`)."""
    problems = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if not target or _SCHEME.match(target) or target.startswith("//"):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor.lower() not in anchors(resolved.read_text("utf-8")):
            problems.append(f"{where}: no heading with anchor #{anchor} in {resolved.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page, REPO) == []


def test_the_readme_links_every_docs_page() -> None:
    readme = REPO / "README.md"
    linked = {(readme.parent / target.partition("#")[0]).resolve() for _, target in links(readme.read_text())}
    pages = {p.resolve() for p in PAGES if p != readme}
    assert pages - linked == set()


def test_slugs_follow_githubs_rules() -> None:
    page = "\n".join(
        [
            "# Coming from haiku.rag",
            "## HTTP, bearer tokens and access control",
            "## analyze: the built-in agent",
            "## The `search` tool (**fast**)",
            "## Notes",
            "## Notes",
            "```",
            "## Not a heading",
            "```",
            "Setext title",
            "------------",
        ]
    )
    assert anchors(page) == {
        "coming-from-haikurag",
        "http-bearer-tokens-and-access-control",
        "analyze-the-built-in-agent",
        "the-search-tool-fast",
        "notes",
        "notes-1",
        "setext-title",
    }


def test_broken_files_and_anchors_are_reported(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "page.md").write_text("# A page\n\n## Its part\n")
    (tmp_path / "outside.md").write_text("# Outside the repository\n")
    readme = root / "README.md"
    readme.write_text(
        "# Read me\n\n"
        "[fine](docs/page.md#its-part) [also fine](#read-me) [web](https://example.com/x.md#nope) [dir](docs)\n"
        "[gone](docs/missing.md) [bad anchor](docs/page.md#its-whole) [here](#nowhere)\n"
        "`[in code](docs/missing-too.md)`\n\n"
        "```\n[in a block](docs/missing-three.md)\n```\n\n"
        "[ref]: docs/page.md#a-page\n[outside]: ../outside.md\n"
    )
    assert broken_links(readme, root) == [
        "README.md:4: docs/missing.md: no such file",
        "README.md:4: docs/page.md#its-whole: no heading with anchor #its-whole in page.md",
        "README.md:4: #nowhere: no heading with anchor #nowhere in README.md",
        "README.md:12: ../outside.md: outside the repository",
    ]
