"""The MCP surface: tools, resources, prompts, transports, auth."""
