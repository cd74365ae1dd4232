"""ChatEndpoint: where the LLM is, built once from the settings (configured.py) and shared by
its clients; and the form of a reply's JSON schema that llama.cpp takes."""

from dataclasses import dataclass
from typing import Any

import httpx

from agentic_rag.config import StructuredOutput

LOCAL_BASE_URL = "http://local-llm/v1"
"""The base URL the local model answers on; only its transport reaches it (no socket)."""


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat API: a server, or the local model's in-process transport."""

    base_url: str
    model: str
    small_model: str
    api_key: str | None = None
    transport: httpx.AsyncBaseTransport | None = None
    structured_output: StructuredOutput = "json_schema"
    """How a reply's JSON schema is sent (config.py: `llm_structured_output`)."""

    def describe(self) -> str:
        if self.transport is not None:
            return f"the local model {self.model}"
        return f"LLM {self.model} at {self.base_url}"

    def http_client(self, timeout: float) -> httpx.AsyncClient:
        """A client of the API's base URL, with its key."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            transport=self.transport,
        )


def schema_in_json_object(response_format: dict[str, Any]) -> dict[str, Any]:
    """`{"type": "json_schema", "json_schema": {"schema": S}}` as `{"type": "json_object",
    "schema": S}`: how llama-cpp-python (in process, or its server) takes a schema, which it
    compiles to a grammar; it ignores the first form. Other formats pass unchanged."""
    if response_format.get("type") != "json_schema":
        return response_format
    schema = (response_format.get("json_schema") or {}).get("schema")
    return {"type": "json_object", "schema": schema}
