"""The pydantic-ai front door: the analysis toolset, the built-in agent and its Python API.

Uses the same `AnalysisSession` as the MCP server, and the same tool descriptions and
result models (`mcp_analysis.tooling`); imports nothing from `mcp_analysis.server`.
"""
