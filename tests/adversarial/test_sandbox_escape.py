"""Hostile code: every attack must be contained, and the session must keep working after it.

Each case runs in a session scoped to the advisories (``uri LIKE '%advisory%'``) with a
variable set beforehand; after the attack the variable must still be readable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.models import ExecutionResult
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

FILTER = "uri LIKE '%advisory%'"
SECRET_ENV = "MCP_ANALYSIS_TEST_SECRET"


@dataclass
class Case:
    name: str
    code: str
    check: Callable[[ExecutionResult], bool]


def fails_with(*fragments: str) -> Callable[[ExecutionResult], bool]:
    if not fragments:
        raise ValueError("fails_with() needs the text the error must contain: any failure is not a check")
    return lambda r: not r.success and all(f in (r.error or "") for f in fragments)


def value_is(expected: str) -> Callable[[ExecutionResult], bool]:
    return lambda r: r.success and r.value == expected


CASES = [
    Case("os.system", "import os\nos.system('touch /tmp/pwned')", fails_with("AttributeError")),
    Case("subprocess", "import subprocess\nsubprocess.run(['id'])", fails_with("ModuleNotFoundError")),
    Case("socket", "import socket\nsocket.create_connection(('1.1.1.1', 80))", fails_with("ModuleNotFoundError")),
    Case("ctypes", "import ctypes", fails_with("ModuleNotFoundError")),
    Case("importlib", "import importlib\nimportlib.import_module('os')", fails_with("ModuleNotFoundError")),
    Case("sys.modules", "import sys\nsys.modules['os']", fails_with("AttributeError")),
    Case("__import__", "__import__('os').system('id')", fails_with("NameError", "__import__")),
    Case("eval escape", "eval(\"__import__('os')\")", fails_with("NameError", "__import__")),
    Case("exec import", "exec('import subprocess')", fails_with("ModuleNotFoundError")),
    Case("open /etc/passwd", "open('/etc/passwd').read()", fails_with("FileNotFoundError")),
    Case(
        "path traversal",
        "from pathlib import Path\nPath('/documents/../../etc/passwd').read_text()",
        fails_with("FileNotFoundError"),
    ),
    Case(
        "relative traversal",
        "from pathlib import Path\nPath('documents/../../../etc/hostname').read_text()",
        fails_with("FileNotFoundError"),
    ),
    Case("proc environ", "open('/proc/self/environ').read()", fails_with("FileNotFoundError")),
    Case(
        "null byte path",
        "from pathlib import Path\nPath('/documents/x\\x00/../../etc/passwd').read_text()",
        fails_with("ValueError: embedded null byte"),
    ),
    Case(
        "encoded dots",
        "from pathlib import Path\nPath('/documents/%2e%2e/%2e%2e/etc/passwd').exists()",
        value_is("False"),
    ),
    Case("list root", "import os\nos.listdir('/')", value_is("['documents']")),
    Case(
        "environment empty",
        f"import os\n(os.environ, os.getenv('{SECRET_ENV}'), os.getenv('PATH'))",
        value_is("({}, None, None)"),
    ),
    Case(
        "write into documents",
        "from pathlib import Path\nPath('/documents/new.txt').write_text('x')",
        fails_with("PermissionError"),
    ),
    Case("open for writing", "open('/documents/' + first + '/content.txt', 'w')", fails_with("PermissionError")),
    Case("append", "open('/documents/' + first + '/content.txt', 'a').write('x')", fails_with("PermissionError")),
    Case("mkdir", "from pathlib import Path\nPath('/documents/evil').mkdir()", fails_with("PermissionError")),
    Case(
        "unlink",
        "from pathlib import Path\nPath('/documents/' + first + '/content.txt').unlink()",
        fails_with("PermissionError"),
    ),
    Case(
        "rename",
        "from pathlib import Path\nPath('/documents/' + first).rename('/documents/x')",
        fails_with("PermissionError"),
    ),
    Case("write outside", "open('/tmp/pwned', 'w').write('x')", fails_with("PermissionError")),
    Case("dunder subclasses", "().__class__.__bases__[0].__subclasses__()", fails_with("AttributeError")),
    Case("type subclasses", "type.__subclasses__(object)", fails_with("AttributeError", "__subclasses__")),
    Case("function globals", "def f():\n    pass\nf.__globals__", fails_with("AttributeError")),
    Case("getattr dunder", "getattr(getattr, '__self__')", fails_with("AttributeError", "__self__")),
    Case("infinite loop", "while True:\n    pass", fails_with("sandbox.code_timeout", "kept")),
    Case(  # one native operation past the limit: its process is ended, and the error says the same
        "native arithmetic past the timeout",
        "x = 7 ** (3 * 10 ** 7)\ny = x * x\nz = y * y",
        fails_with("TimeoutError: execution stopped after 2 s (sandbox.code_timeout) (inside one operation", "kept"),
    ),
    Case("memory bomb", "x = 'a' * (10 ** 10)", fails_with("MemoryError")),
    Case("growing list", "xs = []\nwhile True:\n    xs.append('y' * 10000)", fails_with("kept")),
    Case(
        "deep recursion",
        "def f(n):\n    return f(n + 1)\nf(0)",
        fails_with("RecursionError", "sandbox.max_recursion_depth"),
    ),
    Case("giant output", "print('z' * 10_000_000)", lambda r: r.success and r.truncated and len(r.stdout) < 60_000),
    Case(
        "print flood",
        "for i in range(10 ** 7):\n    print(i)",
        lambda r: r.truncated and 50_000 <= len(r.stdout) < 60_000 and "sandbox.code_timeout" in (r.error or ""),
    ),
    Case(
        "statistics result bomb",
        "import statistics\nq = statistics.quantiles([1, 2, 3], n=20_000_000)",
        fails_with("ValueError: statistics.quantiles()", "sandbox.max_memory_mb"),
    ),
    Case(
        "statistics argument bomb",
        "import statistics\nstatistics.mean(list(range(1_000_000)))",
        fails_with("ValueError: statistics.mean()", "more than 524,288 values"),
    ),
    Case(
        "huge path",
        "from pathlib import Path\nPath('/documents/' + 'a' * 100_000).exists()",
        fails_with("File name too long"),
    ),
    Case(
        "100k host calls",
        "from pathlib import Path\nfor i in range(100_000):\n    Path('/documents').exists()",
        fails_with("sandbox.max_host_calls"),
    ),
    Case(
        "search flood",
        "import asyncio\nawait asyncio.gather(*[search('x') for _ in range(5000)])",
        fails_with("host call limit of 2000 exceeded in this call", "sandbox.max_host_calls"),
    ),
    Case("sleep", "import time\ntime.sleep(1000)", fails_with("TimeoutError")),
    Case("bad search args", "await search(123)", fails_with("TypeError", "query must be")),
    Case("huge search limit", "await search('x', limit=10 ** 9)", fails_with("ValueError", "limit")),
    Case(
        "guessed filtered-out id: read",
        "open('/documents/' + hidden + '/content.txt').read()",
        fails_with("FileNotFoundError"),
    ),
    Case(
        "guessed filtered-out id: exists",
        "from pathlib import Path\n(Path('/documents/' + hidden).exists(), Path('/documents/' + hidden + '/metadata.json').exists())",
        value_is("(False, False)"),
    ),
    Case("guessed filtered-out id: listing", "import os\nhidden in os.listdir('/documents')", value_is("False")),
    Case(
        "filtered-out docs never in search",
        "rs = await search('quarterly revenue net income', limit=10)\nall('advisory' in r['document_uri'] for r in rs) and len(rs) > 0",
        value_is("True"),
    ),
    Case(
        "filtered-out docs never listed",
        "docs = await list_documents()\n(len(docs), hidden in [d['id'] for d in docs])",
        value_is("(4, False)"),
    ),
    Case(
        "walk sees only the filter",
        # 4 documents in the filter, 5 files each (tables/*.csv follow each document's tables.json)
        "import os\nsum(1 for root, dirs, files in os.walk('/documents') if not root.endswith('/tables') for f in files)",
        value_is("20"),
    ),
]


@pytest.fixture
async def hostile(sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[AnalysisSession, str]]:
    monkeypatch.setenv(SECRET_ENV, "do-not-leak")
    settings = make_settings(
        sample_db,
        sandbox={"code_timeout": 2.0, "max_memory_mb": 128, "max_host_calls": 2000, "max_recursion_depth": 200},
    )
    kb = await KnowledgeBase.open(settings)
    hidden = next(d.id for d in await kb.corpus().documents() if "advisory" not in d.uri)
    async with AnalysisSession(kb, filter=FILTER) as session:
        setup = await session.execute(
            f"import os\nmarker = 'alive'\nhidden = '{hidden}'\nfirst = sorted(os.listdir('/documents'))[0]"
        )
        assert setup.success, setup.error
        yield session, hidden
    await kb.close()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_attack_is_contained(hostile: tuple[AnalysisSession, str], case: Case) -> None:
    session, _ = hostile
    result = await session.execute(case.code)
    assert case.check(result), f"{case.name}: {result}"
    assert "do-not-leak" not in (result.stdout + result.stderr + (result.value or "") + (result.error or ""))
    after = await session.execute("marker")
    assert after.success and after.value == "'alive'", f"session broken after {case.name}: {after}"


HARMLESS = [
    ExecutionResult(success=True, value="None"),
    ExecutionResult(success=True, value="'alive'", stdout="alive\n"),
    ExecutionResult(success=False, error="NameError: name 'x' is not defined"),
    ExecutionResult(success=False, error="ZeroDivisionError: division by zero"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_check_can_fail(case: Case) -> None:
    """No check is vacuous: harmless outcomes (success, an unrelated error) must not satisfy it."""
    assert not any(case.check(outcome) for outcome in HARMLESS), case.name


async def test_nothing_escaped_to_the_host(hostile: tuple[AnalysisSession, str], tmp_path: Path) -> None:
    """Self-contained: every way out tried here, against a path only this test uses."""
    session, _ = hostile
    target = tmp_path / "pwned"
    attempts = [
        f"import os\nos.system('touch {target}')",
        f"open('{target}', 'w').write('x')",
        f"from pathlib import Path\nPath('{target}').write_text('x')",
        f"from pathlib import Path\nPath('/documents/../..{target}').write_text('x')",
        f"import subprocess\nsubprocess.run(['touch', '{target}'])",
    ]
    for code in attempts:
        result = await session.execute(code)
        assert not result.success, code
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
