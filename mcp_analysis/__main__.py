"""`python -m mcp_analysis` == the `mcp-analysis` command."""

from mcp_analysis.cli import main

main()
