"""What both front doors share about the analysis tools: the text a model reads and the results.

The MCP server (server/) and the pydantic-ai toolset (agent/) register the same tools with
the descriptions in `descriptions`, and shape what they return with the models here:
each result is a structured model plus compact text, fitted to a character budget with a
note naming where the rest is. Nothing here knows a protocol: resource URIs, session
notes and the MCP wrapping are passed in, or stay in server/. Neither front door is
imported from here.
"""
