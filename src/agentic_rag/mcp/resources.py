"""The caller's documents as MCP resources: listed page by page, read by URI, and templated.

A document's URI is `agentic-rag://documents/{document_id}`; reading it gives the document's
text (the text its chunks' character spans point into), as `text/markdown` when it was
markdown and `text/plain` otherwise, with its title and where it came from. Every request is
the caller's tenant's: another tenant's document reads like an unknown one. Without the
knowledge engine (a server of other skills) there are no documents and no template.
"""

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import mcp.types as types
from mcp.shared.exceptions import MCPError

from agentic_rag.knowledge.errors import NotFound
from agentic_rag.mcp.access import Context, PrincipalFor, require

if TYPE_CHECKING:
    from agentic_rag.knowledge.results import DocumentInfo
    from agentic_rag.knowledge.service import KnowledgeService

"""The engine's running knowledge service."""

SCHEME = "agentic-rag"
TEMPLATE = f"{SCHEME}://documents/{{document_id}}"
_URI = re.compile(rf"{SCHEME}://documents/(?P<id>[^/?#]+)")
PAGE_SIZE = 50

DOCUMENT_TEMPLATE = types.ResourceTemplate(
    name="document",
    title="A document of the knowledge base",
    uri_template=TEMPLATE,
    description="The text of an ingested document, by its document_id (as search hits, "
    "get_document and resources/list give it).",
)


def document_uri(document_id: str) -> str:
    return f"{SCHEME}://documents/{quote(document_id, safe='')}"


def document_id_of(uri: str) -> str | None:
    """The document id a document's URI names, or None for another URI."""
    match = _URI.fullmatch(uri)
    return None if match is None else unquote(match["id"])


def text_mime_type(document_mime_type: str) -> str:
    # The stored text is the extracted text of any source; only markdown keeps its markup.
    return "text/markdown" if document_mime_type == "text/markdown" else "text/plain"


def _meta(document: "DocumentInfo") -> dict[str, Any]:
    return {
        "documentId": document.document_id,
        "sourceId": document.source_id,
        "sourceUri": document.uri,
        "title": document.title,
        "chunks": document.chunks,
        "updatedAt": document.updated_at.isoformat(),
    }


def _resource(document: "DocumentInfo") -> types.Resource:
    return types.Resource(
        uri=document_uri(document.document_id),
        name=document.title or document.uri,
        title=document.title or None,
        description=f"{document.title or document.uri}, from {document.uri}",
        mime_type=text_mime_type(document.mime_type),
        meta=_meta(document),
    )


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise MCPError(types.INVALID_PARAMS, f"cursor {cursor!r} is not one this server gave")
    return int(cursor)


def _unknown(uri: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}", data={"uri": uri})


class DocumentResources:
    """The `resources/list`, `resources/templates/list` and `resources/read` handlers."""

    def __init__(self, knowledge: "KnowledgeService | None", principal_for: PrincipalFor) -> None:
        self._knowledge, self._principal_for = knowledge, principal_for

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        principal = require(self._principal_for(ctx), "read", "resources/list")
        offset = _offset(params.cursor if params else None)
        if self._knowledge is None:
            return types.ListResourcesResult(resources=[])
        # One more than a page: whether there is a next page, without counting them all.
        documents = await self._knowledge.documents(
            principal.tenant, source_id=None, limit=PAGE_SIZE + 1, offset=offset
        )
        more = len(documents) > PAGE_SIZE
        return types.ListResourcesResult(
            resources=[_resource(d) for d in documents[:PAGE_SIZE]],
            next_cursor=str(offset + PAGE_SIZE) if more else None,
        )

    async def list_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        require(self._principal_for(ctx), "read", "resources/templates/list")
        templates = [DOCUMENT_TEMPLATE] if self._knowledge is not None else []
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        principal = require(self._principal_for(ctx), "read", "resources/read")
        document_id = document_id_of(params.uri)
        if document_id is None or self._knowledge is None:
            raise _unknown(params.uri)
        try:
            document = await self._knowledge.document(principal.tenant, document_id, with_text=True)
        except NotFound:  # no such document (of this tenant)
            raise _unknown(params.uri) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=params.uri,
                    mime_type=text_mime_type(document.mime_type),
                    text=document.text or "",
                    meta=_meta(document),
                )
            ]
        )
