"""`python -m mcp_analysis` == the `mcp-analysis` command."""

from mcp_analysis.cli.app import main

main()
