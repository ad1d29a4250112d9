"""What `serve --http` tells a caller without a token: /healthz and /metrics reveal no locations,
secrets or raw errors, and metric labels are never the client's words.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.mcp_helpers import free_port, http_server


def test_health_and_metrics_reveal_no_locations_or_reasons_without_a_token(sample_db: Path, tmp_path: Path) -> None:
    # /healthz is unauthenticated (balancers and readiness probes call it without a token), so
    # with tokens configured it tells an anonymous caller only ok/failing per part: the knowledge
    # base's location and each failing part's raw error text (hosts, ports, object-store error
    # bodies) need a token.
    token = "hos-health-token-0123456789"
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - name: ops\n    token: {token}\n    filter: \"uri LIKE '%secret-project%'\"\n")
    dead_redis = free_port()
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__STORE": f"redis://:hunter2-password@127.0.0.1:{dead_redis}/0",
        "MCP_ANALYSIS_SESSIONS__SECRET": "health-secret-0123456789abcdef",
    }
    with http_server(sample_db, "--tokens-file", str(tokens), env=env, log_dir=tmp_path) as server:
        base = f"http://127.0.0.1:{server.port}"
        deadline = time.monotonic() + 60
        while (anonymous := httpx2.get(f"{base}/healthz", timeout=10)).json()["checks"]["workers"] != "ok":
            assert time.monotonic() < deadline, anonymous.text
            time.sleep(0.25)
        authorized = httpx2.get(f"{base}/healthz", headers={"Authorization": f"Bearer {token}"}, timeout=10)

        async def made_up_tools() -> None:  # label values are never the client's words
            async with server.client(token) as client:
                for n in range(30):
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool(f"evil-{n}-{'x' * 200}", {})
                    assert refused.value.error.code == INVALID_PARAMS

        anyio.run(made_up_tools)
        metrics = httpx2.get(f"{base}/metrics", timeout=10)
    assert anonymous.status_code == authorized.status_code == 503
    body = anonymous.json()
    assert body["ready"] is False and body["checks"] == {
        "knowledge_base": "ok",
        "session_store": "failing",
        "workers": "ok",
    }
    public = anonymous.text + metrics.text
    for secret in (str(sample_db), str(dead_redis), "hunter2", token, "secret-project"):
        assert secret not in public, secret
    detailed = authorized.json()
    assert detailed["db"] == str(sample_db) and str(dead_redis) in detailed["checks"]["session_store"]
    assert "hunter2" not in authorized.text
    assert metrics.status_code == 200 and "mcp_analysis_ready 0.0" in metrics.text
    # An unknown tool is refused as invalid params before it counts as a call: no label is the client's words.
    labels = set(re.findall(r'tool="([^"]*)"', metrics.text))
    assert "evil" not in metrics.text and labels <= {"unknown"}, labels
