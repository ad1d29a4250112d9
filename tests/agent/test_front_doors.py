"""The two front doors share one home for tool text and results, and never import each other.

`mcp_analysis.agent` (the pydantic-ai toolset and client) and `mcp_analysis.server` (MCP)
both take their descriptions, argument types and result models from `mcp_analysis.tooling`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mcp import Client

from mcp_analysis.agent.toolset import AnalysisToolset
from mcp_analysis.server.app import create_server
from mcp_analysis.tooling import descriptions
from tests.conftest import REPO, make_settings

pytestmark = pytest.mark.anyio
PACKAGE = REPO / "mcp_analysis"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (function-level and TYPE_CHECKING imports too)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imports_of_package(name: str) -> dict[str, set[str]]:
    return {str(p.relative_to(REPO)): imported_modules(p) for p in sorted((PACKAGE / name).rglob("*.py"))}


def reaching(imports: dict[str, set[str]], forbidden: str) -> dict[str, list[str]]:
    return {
        path: sorted(m for m in modules if m == forbidden or m.startswith(forbidden + "."))
        for path, modules in imports.items()
        if any(m == forbidden or m.startswith(forbidden + ".") for m in modules)
    }


def test_the_import_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The check below would pass vacuously if the walk missed lazy imports: it does not."""
    module = REPO / "mcp_analysis" / "agent" / "toolset.py"
    assert "mcp_analysis.corpus.KnowledgeBase" in imported_modules(module)  # imported inside __aenter__


def test_the_agent_imports_nothing_from_the_server() -> None:
    assert reaching(imports_of_package("agent"), "mcp_analysis.server") == {}


def test_the_shared_tooling_imports_neither_front_door() -> None:
    imports = imports_of_package("tooling")
    assert reaching(imports, "mcp_analysis.server") == {}
    assert reaching(imports, "mcp_analysis.agent") == {}
    assert reaching(imports, "mcp") == {}  # no protocol: the MCP wrapping stays in server/


def test_sessions_know_no_mcp_method_names() -> None:
    for path in sorted((PACKAGE / "session").rglob("*.py")):
        source = path.read_text()
        for method in ("tools/call", "resources/read", "resources/list"):
            assert method not in source, f"{path.relative_to(REPO)} names the MCP method {method}"


async def test_both_front_doors_describe_the_shared_tools_with_the_same_text(sample_db: Path, tmp_path: Path) -> None:
    toolset = AnalysisToolset(settings=make_settings(sample_db))
    agent_tools = {name: tool.tool_def for name, tool in toolset.tools.items()}
    async with Client(create_server(config=make_settings(sample_db, sessions={"dir": tmp_path / "s"}))) as client:
        mcp_tools = {t.name: t for t in (await client.list_tools()).tools}
        instructions = client.instructions
    assert set(agent_tools) == {"search", "list_documents", "execute_code", "cite"}
    for name, agent_tool in agent_tools.items():
        assert agent_tool.description == mcp_tools[name].description, name
        mcp_properties = mcp_tools[name].input_schema["properties"]
        for argument, schema in agent_tool.parameters_json_schema["properties"].items():
            assert schema["description"] == mcp_properties[argument]["description"], (name, argument)
    assert agent_tools["execute_code"].description == descriptions.EXECUTE_CODE
    assert instructions == descriptions.INSTRUCTIONS
