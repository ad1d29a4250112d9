"""docs/deploy: the docker-compose example parses and its settings are ones mcp-analysis accepts.

Docker cannot run on the machines this project is built on, so the example is checked
statically: YAML structure, every MCP_ANALYSIS_* / AWS_* value through the real settings
loader, and the load balancer's servers and health check against the compose services.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_analysis.config import load_settings
from tests.conftest import REPO

DEPLOY = REPO / "docs" / "deploy"


def interpolate(value: str) -> str:
    """Compose's ${VAR:-default} and ${VAR:?error}, with a stand-in for required values."""

    def one(match: re.Match[str]) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3)
        return rest if op == ":-" else f"test-value-for-{name.lower()}-0123456789"

    return re.sub(r"\$\{(\w+)(:[-?])([^}]*)\}", one, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_compose_has_replicas_redis_object_store_and_a_balancer(compose: dict[str, Any]) -> None:
    services = compose["services"]
    replicas = sorted(n for n in services if n.startswith("replica-"))
    assert replicas == ["replica-1", "replica-2", "replica-3"]
    assert {"redis", "minio", "bucket", "loadbalancer", "ingest"} <= set(services)
    for name in replicas:
        service = services[name]
        assert service["command"][:3] == ["mcp-analysis", "serve", "--http"]
        assert "/healthz" in " ".join(service["healthcheck"]["test"])
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["ingest"]["command"][:2] == ["mcp-analysis", "add"]


def test_replica_environment_is_valid_configuration(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./mcp-analysis.yaml
    environment = {k: interpolate(str(v)) for k, v in compose["services"]["replica-1"]["environment"].items()}
    assert environment["AWS_ALLOW_HTTP"] == "true" and environment["AWS_ENDPOINT_URL"].startswith("http://minio")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text((DEPLOY / "tokens.example.yaml").read_text())
    environment["MCP_ANALYSIS_SERVER__TOKENS_FILE"] = str(tokens)
    for key, value in environment.items():
        if key.startswith("MCP_ANALYSIS_"):
            monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.db == "s3://knowledge-base/kb"  # a URI, not a mangled path
    assert settings.sessions.store == "redis://redis:6379/0"
    assert settings.sessions.secret is not None
    assert settings.server.host == "0.0.0.0" and "mcp.example.com" in settings.server.allowed_hosts
    from mcp_analysis.server.auth import load_tokens

    assert len(load_tokens(tokens)) == 2


def test_balancer_routes_to_every_replica_and_checks_health(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "haproxy.cfg").read_text()
    servers = re.findall(r"^\s+server (\S+) (\S+):8765", config, flags=re.M)
    assert sorted(name for name, _ in servers) == sorted(n for n in compose["services"] if n.startswith("replica-"))
    assert "option httpchk GET /healthz" in config and "balance roundrobin" in config
    # Only legacy clients (with an Mcp-Session-Id) are pinned to a replica.
    assert "stick on req.hdr(mcp-session-id)" in config
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert '"serve", "--http"' in dockerfile and "COPY mcp_analysis" in dockerfile
