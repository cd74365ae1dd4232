"""MCP: the skills registry served as MCP tools, over Streamable HTTP at /mcp and over stdio.

- `server`: the MCP server built from a registry (tools, resources, prompt, tasks, scopes)
- `access`: the caller's principal and the scope each method needs
- `calls`: what every tool call shares (its skill, its arguments, its result)
- `context`: the skill context of one tool call run in-process
- `elicitation`: asking the caller for what a skill needs
- `durable`: calls of resumable skills, run as A2A tasks
- `tasks`: MCP tasks (2025-11-25) over those A2A tasks
- `resources`: the caller's documents as resources
- `prompts`: the prompt `answer_with_citations`
- `http`: the stateless /mcp endpoint of the app
- `stdio`: `agentic-rag mcp`, in-process or bridged to a running server (`bridge`)
"""
