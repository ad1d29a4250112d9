"""An HTML page's whole text through the real command line: `add`, then the document's text as
the sandbox reads it (`mcp-analysis exec`)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.ingest.test_html_text import DATA, assert_in_order

pytestmark = [pytest.mark.slow]

READ_TEXT = """
from pathlib import Path
(doc,) = await list_documents()
Path(f"/documents/{doc['id']}/content.txt").read_text()
"""


def test_added_texinfo_page_keeps_the_paragraphs_after_its_argument_table(tmp_path: Path) -> None:
    page = shutil.copy(DATA / "libffi-closure-api.html", tmp_path / "The-Closure-API.html")
    db = tmp_path / "kb.lancedb"
    added = run_cli("--db", str(db), "add", str(page))
    assert added.returncode == 0, added.stderr
    assert "not in the converted document" not in added.stderr
    read = run_cli("--db", str(db), "exec", "--json", READ_TEXT)
    assert read.returncode == 0, read.stderr
    text = " ".join(ast.literal_eval(json.loads(read.stdout)["value"]).split())  # the value's repr
    assert_in_order(
        [
            "Prepare a closure function. The arguments to ffi_prep_closure_loc are:",
            "The function which will be called when the closure is invoked. It is called with the arguments:",
            "The same user_data that was passed to ffi_prep_closure_loc.",
            "ffi_prep_closure_loc will return FFI_OK if everything went ok",
            "After calling ffi_prep_closure_loc, you can cast codeloc to the appropriate pointer-to-function type.",
        ],
        text,
    )


_TEXINFO = (
    "<dl><dt>Term 1.</dt><dd><p>Intro 2.</p><dl><dt>Arg 3.</dt><dd>Desc 4.</dd></dl>"
    "<p>Outro 5.</p><p>Outro 6.</p></dd></dl><p>Outside 7.</p>"
)


@pytest.mark.parametrize("name", ["book.epub", "notes.md"])
def test_an_added_epub_chapter_or_markdown_html_block_keeps_the_text_around_a_nested_list(
    tmp_path: Path, name: str
) -> None:
    """EPUB chapters and Markdown HTML blocks go through the same HTML backend as a page."""
    from tests.ingest.test_epub_text import write_book

    path = tmp_path / name
    if name.endswith(".epub"):
        write_book(path, ["<h1>Opening 0.</h1>", _TEXINFO])
    else:
        path.write_text(f"# Opening 0.\n\n{_TEXINFO}\n", "utf-8")
    db = tmp_path / "kb.lancedb"
    added = run_cli("--db", str(db), "add", str(path))
    assert added.returncode == 0, added.stderr
    read = run_cli("--db", str(db), "exec", "--json", READ_TEXT)
    assert read.returncode == 0, read.stderr
    text = " ".join(ast.literal_eval(json.loads(read.stdout)["value"]).split())
    assert_in_order(
        ["Opening 0.", "Term 1.", "Intro 2.", "Arg 3.", "Desc 4.", "Outro 5.", "Outro 6.", "Outside 7."], text
    )
