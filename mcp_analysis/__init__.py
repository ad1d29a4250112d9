"""mcp-analysis: an MCP server for analysing document knowledge bases.

Python API:

- ``AnalysisSession`` runs sandboxed code over a knowledge base (no MCP needed);
- ``AnalysisClient`` answers questions with the built-in agent;
- ``create_server`` builds the MCP server, ``create_toolset`` a pydantic-ai toolset,
  ``create_skill`` the same with haiku.rag's skill API.
"""

from __future__ import annotations

import os
from typing import Any

# Lance logs deprecation chatter from Rust at WARN; keep stderr for our own messages.
os.environ.setdefault("LANCEDB_LOG", "error")
# onnxruntime (1.32+, Linux too) otherwise keeps a device id and usage events under ~/.cache/Microsoft
# and uploads them to Microsoft's collector when it can: "everything runs offline" says no. Read when
# onnxruntime initialises, so it must be set before the embedder loads; ORT_DISABLE_TELEMETRY=0 opts in.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from mcp_analysis.version import __version__ as __version__  # re-exported: mcp_analysis.__version__

__all__ = ["AnalysisClient", "AnalysisSession", "KnowledgeBase", "create_server", "create_skill", "create_toolset"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package must stay cheap (cold start of the server matters).
    if name == "AnalysisSession":
        from mcp_analysis.session.analysis import AnalysisSession

        return AnalysisSession
    if name == "KnowledgeBase":
        from mcp_analysis.corpus import KnowledgeBase

        return KnowledgeBase
    if name == "AnalysisClient":
        from mcp_analysis.agent.client import AnalysisClient

        return AnalysisClient
    if name == "create_server":
        from mcp_analysis.server.app import create_server

        return create_server
    if name == "create_toolset":
        from mcp_analysis.agent.toolset import create_toolset

        return create_toolset
    if name == "create_skill":
        from mcp_analysis.agent.skill import create_skill

        return create_skill
    raise AttributeError(name)
