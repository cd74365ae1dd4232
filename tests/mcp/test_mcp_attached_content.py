"""What a skill attaches (`ctx.attach`) as MCP content of its tool result (mcp/content.py).

The path through the adapter (a skill attaching an image, a sound, an embedded resource) is
run by the official conformance suite's tools-call-* scenarios against conformance/run-mcp-sut
(conformance/test_mcp_conformance.py).
"""

import base64

import mcp.types as types

from agentic_rag.mcp.content import attached_block
from agentic_rag.skills import DataResult, FileResult

PNG = b"\x89PNG\r\n\x1a\n"


def test_text_and_data_are_text_blocks() -> None:
    assert attached_block("a note") == types.TextContent(type="text", text="a note")
    block = attached_block(DataResult({"key": "value", "count": 42}))
    assert isinstance(block, types.TextContent)
    assert block.text == '{"key": "value", "count": 42}'


def test_an_image_and_a_sound_keep_their_media_types() -> None:
    image = attached_block(FileResult(name="page-3.png", media_type="image/png", content=PNG))
    assert isinstance(image, types.ImageContent)
    assert (image.mime_type, base64.b64decode(image.data)) == ("image/png", PNG)
    sound = attached_block(FileResult(name="a.wav", media_type="audio/wav", content=b"RIFF"))
    assert isinstance(sound, types.AudioContent)
    assert (sound.mime_type, base64.b64decode(sound.data)) == ("audio/wav", b"RIFF")


def test_a_file_at_a_url_is_a_link() -> None:
    url = "https://example.com/report.pdf"
    block = attached_block(FileResult(name="report.pdf", media_type="application/pdf", url=url))
    assert isinstance(block, types.ResourceLink)
    assert (str(block.uri), block.name, block.mime_type) == (url, "report.pdf", "application/pdf")


def test_other_files_are_embedded_as_text_or_blob() -> None:
    text = attached_block(FileResult(name="test://notes", media_type="text/plain", content=b"hi"))
    assert isinstance(text, types.EmbeddedResource)
    assert isinstance(text.resource, types.TextResourceContents)
    assert (str(text.resource.uri), text.resource.text) == ("test://notes", "hi")

    data = b"%PDF-1.7"
    blob = attached_block(
        FileResult(name="my report.pdf", media_type="application/pdf", content=data)
    )
    assert isinstance(blob, types.EmbeddedResource)
    assert isinstance(blob.resource, types.BlobResourceContents)
    assert str(blob.resource.uri) == "attachment:my%20report.pdf"
    assert base64.b64decode(blob.resource.blob) == data
