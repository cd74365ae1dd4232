"""MCP: the skills registry served as MCP tools, over Streamable HTTP at /mcp and over stdio.

- `server`: the MCP server built from a registry (tools/list, tools/call, scopes, elicitation)
- `context`: the skill context of one tool call
- `elicitation`: asking the caller for what a skill needs
- `http`: the stateless /mcp endpoint of the app
- `stdio`: `agentic-rag mcp`, in-process or bridged to a running server (`bridge`)
"""
