"""The command line (`agentic-rag`, `agentic-rag-mcp`): the parser and its commands (main.py),
the skill client and the skill commands, the knowledge commands, the peers commands."""

from agentic_rag.cli.main import main, mcp_main

__all__ = ["main", "mcp_main"]
