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
