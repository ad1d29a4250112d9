"""Command line: ``mcp-analysis serve | add | rm | sync | list | search | info | exec | analyze``.

The contract: errors are one line on stderr and exit code 1 (``--debug`` shows the
traceback, Ctrl-C exits 130); human output goes to the terminal, ``--json`` prints
machine-readable results on stdout. `cli.app` holds the Typer application and `main`,
the console script. Commands call the same layers as the MCP server (corpus, ingest,
session, agent) and import them lazily, so ``--help`` stays fast.
"""
