"""The MCP front door: tools, resources, completion, the prompt, transports, auth.

Thin by contract: a handler resolves the caller (identity.py) and their session, calls
the same `AnalysisSession` method the CLI and the Python API call, and shapes the result
with `mcp_analysis.tooling`; only the MCP wrapping (CallToolResult, resource URIs, the
session-handle note) and MCP method names live here. Every `AnalysisError` reaches the
client as its message (errors.py); SDK internals are touched in sdk_compat.py only.
`app.create_server` assembles the parts; nothing below this layer imports it.
"""
