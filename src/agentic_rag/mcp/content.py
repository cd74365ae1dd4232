"""The content blocks a knowledge tool's result carries beside its text.

A client renders MCP content types, not our output models, so a result that names documents
says so in the protocol's terms: search hits and ingested documents as `resource_link`s to
their documents (the URIs `resources/read` reads, mcp/resources.py), each document once in
the order first named; `get_document` with its text as an embedded `resource`, the same
contents `resources/read` gives. The text block stays first: it is what a model reads.
"""

import base64
import json
from urllib.parse import quote, urlsplit

import mcp.types as types
from pydantic import BaseModel

from agentic_rag.knowledge.results import DocumentInfo, IngestSummary, SearchResult
from agentic_rag.knowledge.skills import DocumentsOutput
from agentic_rag.mcp.resources import document_uri, text_mime_type
from agentic_rag.skills import DataResult, ResultPart

# A search's hits name at most its top_k documents; a crawl may name hundreds: the links stop
# here, the structured content lists them all.
MAX_LINKS = 20

Linked = tuple[str, str, str]
"""(document id, title, where it came from)"""


def content_of(output: BaseModel) -> list[types.ContentBlock]:
    """The blocks that follow the text block for `output`; none for other outputs."""
    if isinstance(output, DocumentInfo) and output.text is not None:
        return [_embedded(output)]
    return [_link(*named) for named in _named(output)[:MAX_LINKS]]


def _named(output: BaseModel) -> list[Linked]:
    match output:
        case SearchResult():
            named = [
                (h.provenance.document_id, h.provenance.title, h.provenance.uri)
                for h in output.hits
            ]
        case IngestSummary():
            named = [(d.document_id, d.title, d.uri) for d in output.documents]
        case DocumentsOutput():
            named = [(d.document_id, d.title, d.uri) for d in output.documents]
        case DocumentInfo():
            named = [(output.document_id, output.title, output.uri)]
        case _:
            return []
    first: dict[str, Linked] = {}
    for linked in named:
        first.setdefault(linked[0], linked)
    return list(first.values())


def _link(document_id: str, title: str, uri: str) -> types.ResourceLink:
    return types.ResourceLink(
        type="resource_link",
        uri=document_uri(document_id),
        name=title or uri,
        title=title or None,
        description=f"The document {title or uri}, from {uri}: resources/read gives its text",
    )


def _embedded(document: DocumentInfo) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri=document_uri(document.document_id),
            mime_type=text_mime_type(document.mime_type),
            text=document.text or "",
        ),
    )


def attached_block(part: ResultPart) -> types.ContentBlock:
    """A part a skill attached (`ctx.attach`): text, an image, a sound, a link to a file, or
    the file embedded (its name is its URI when it is one; else `attachment:<name>`)."""
    if isinstance(part, str):
        return types.TextContent(type="text", text=part)
    if isinstance(part, DataResult):
        return types.TextContent(type="text", text=json.dumps(part.data))
    if part.url is not None:
        return types.ResourceLink(
            type="resource_link", uri=part.url, name=part.name, mime_type=part.media_type
        )
    assert part.content is not None  # a FileResult holds its content or a url
    data = base64.b64encode(part.content).decode()
    kind, _, subtype = part.media_type.partition("/")
    if kind == "image":
        return types.ImageContent(type="image", data=data, mime_type=part.media_type)
    if kind == "audio":
        return types.AudioContent(type="audio", data=data, mime_type=part.media_type)
    uri = part.name if urlsplit(part.name).scheme else f"attachment:{quote(part.name)}"
    resource: types.TextResourceContents | types.BlobResourceContents
    if kind == "text" or subtype == "json" or subtype.endswith("+json"):
        text = part.content.decode(errors="replace")
        resource = types.TextResourceContents(uri=uri, mime_type=part.media_type, text=text)
    else:
        resource = types.BlobResourceContents(uri=uri, mime_type=part.media_type, blob=data)
    return types.EmbeddedResource(type="resource", resource=resource)
