"""`GET /`: a small page that says where things are, for whoever opens the server's address.

`POST /` is the A2A JSON-RPC endpoint (a2a/routes.py); a GET there gets this page instead: HTML
for a browser, JSON for a client that prefers `application/json`. It is public, like the Agent
Card it points to (security/middleware.py).
"""

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from agentic_rag.config import Settings

# The documents of the repository, by what a reader looks for.
DOCS = {
    "A2A protocol": "docs/protocol.md",
    "MCP clients": "docs/clients.md",
    "Skills": "docs/skills.md",
    "Security": "docs/security.md",
    "Operations": "docs/operations.md",
}

_HTML = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{name}</title></head>
<body>
<h1>{name}</h1>
<p>{description}</p>
<ul>
<li>Agent Card: <a href="/.well-known/agent.json">/.well-known/agent.json</a>
(A2A 0.3 clients: <a href="/.well-known/agent-card.json">/.well-known/agent-card.json</a>)</li>
<li>A2A JSON-RPC: <code>POST /</code></li>
<li>MCP (Streamable HTTP): <code>/mcp</code></li>
<li>Health: <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a></li>
</ul>
<p>Credentials, once the server requires them (the Agent Card's
<code>securitySchemes</code> say so): <code>X-API-Key: &lt;key&gt;</code>
or <code>Authorization: Bearer &lt;token&gt;</code>.</p>
<p>Documentation, in the agentic-rag repository: {docs}.</p>
</body>
</html>
"""


class HomePage:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def route(self) -> Route:
        return Route("/", self.page, methods=["GET"])  # Starlette answers HEAD too

    async def page(self, request: Request) -> Response:
        accept = request.headers.get("accept", "")
        if quality(accept, "application/json") > quality(accept, "text/html"):
            return JSONResponse(self._links())
        return HTMLResponse(self._html())

    def _links(self) -> dict[str, object]:
        # Absolute, like the Agent Card's `url`: the same public base URL.
        base = self._settings.base_url()
        return {
            "name": self._settings.agent_name,
            "description": self._settings.agent_description,
            "agentCard": f"{base}/.well-known/agent.json",
            "agentCardV030": f"{base}/.well-known/agent-card.json",
            "a2a": f"{base}/",
            "mcp": f"{base}/mcp",
            "docs": DOCS,
        }

    def _html(self) -> str:
        # Links are relative: a browser reached this server under a name that works for it.
        docs = ", ".join(f"{escape(what)} (<code>{path}</code>)" for what, path in DOCS.items())
        return _HTML.format(
            name=escape(self._settings.agent_name),
            description=escape(self._settings.agent_description),
            docs=docs,
        )


def quality(accept: str, media_type: str) -> float:
    """The `q` an Accept header gives `media_type` (RFC 9110 §12.5.1); 1 without a header.

    The most specific range that matches decides: `type/subtype`, then `type/*`, then `*/*`.
    """
    if not accept.strip():
        return 1.0
    kind = media_type.split("/")[0]
    ranks = {media_type: 2, f"{kind}/*": 1, "*/*": 0}
    best, best_rank = 0.0, -1
    for item in accept.split(","):
        media_range, *parameters = (part.strip() for part in item.split(";"))
        rank = ranks.get(media_range.lower())
        if rank is None or rank < best_rank:
            continue
        best, best_rank = _q(parameters), rank
    return best


def _q(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value)
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0  # also NaN
    return 1.0
