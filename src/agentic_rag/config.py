"""Every setting of the service, read from the environment in one place.

Names are `AGENTIC_RAG_<FIELD>` (for example `AGENTIC_RAG_PUBLIC_URL`), except the two that
deployments conventionally set without a prefix: `DATABASE_URL` and `REDIS_URL`.
"""

import ipaddress
import json
import re
import shlex
from http.cookiejar import LoadError, MozillaCookieJar
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agentic_rag.hosts import allow_list_entry, is_host_name

DEFAULT_DATA_DIR = Path("data")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
_CREDENTIALS_FORM = '{"acme": {"https://agent.example:443": {"Authorization": "Bearer ..."}}}'


def _looks_like_origin(key: object) -> bool:
    return isinstance(key, str) and "://" in key


def _check_origins(tenant: str, origins: dict[str, dict[str, SecretStr]]) -> None:
    """Refuse a tenant's peer credentials that name no origin, or no sendable header."""
    for url, headers in origins.items():
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            parsed = None
        if (
            parsed is None
            or parsed.scheme not in ("http", "https")
            or not parsed.host
            or parsed.path not in ("", "/")
            or parsed.query
            or parsed.userinfo
        ):
            raise ValueError(f"{tenant!r}: {url!r} is not an origin (scheme://host:port)")
        for name, secret in headers.items():
            text = secret.get_secret_value()
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{tenant!r}, {url!r}: {name!r} is not a header name")
            if not (text.isascii() and text.isprintable()):
                raise ValueError(
                    f"{tenant!r}, {url!r}: the value of {name} must be printable ASCII"
                )


StructuredOutput = Literal["json_schema", "json_object"]
# The groups of tools a deployment offers over MCP and an API key selects (docs/skills.md).
ToolGroup = Literal[
    "knowledge", "ingest", "graph", "network", "admin", "graphiti-compat", "upstream"
]

# Settings read from one environment variable as a list or a mapping. Read by the validators
# below, not by pydantic-settings (NoDecode), whose failure to parse JSON is a traceback.
HostList = Annotated[list[str], NoDecode]
HOST_LIST_FORMAT = (
    "a comma-separated list of hosts, addresses or networks (127.0.0.1,10.0.0.0/8,"
    'intranet.example) or a JSON list (["127.0.0.1"])'
)


class TenantLimit(BaseModel):
    per_minute: int
    burst: int


class UpstreamMcp(BaseModel):
    """An MCP server whose tools this server offers as its own (docs/graph.md)."""

    name: str = Field(pattern=r"^[A-Za-z0-9-]{1,32}$")
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    namespace_arguments: list[str] = Field(default_factory=lambda: ["group_id", "group_ids"])
    namespace_prefix: str = ""

    @field_validator("headers")
    @classmethod
    def _header_names(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, secret in value.items():
            text = secret.get_secret_value()
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a header name")
            if not (text.isascii() and text.isprintable()):
                raise ValueError(f"the value of {name} must be printable ASCII")
        return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIC_RAG_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address to bind; non-loopback needs credentials.")
    port: int = Field(8000, ge=1, le=65535, description="Port to bind.")
    data_dir: Path = Field(
        DEFAULT_DATA_DIR, description="Where the embedded PostgreSQL and FalkorDB keep data."
    )
    public_url: str | None = Field(
        None, description="Base URL peers use to reach this server; the Agent Card's `url`."
    )
    allowed_hosts: HostList = Field(
        default_factory=list,
        description="Host names this server answers to besides localhost, IP addresses and the "
        "public URL's host (a reverse proxy's, a LAN name), and whose pages may call it; any "
        "other `Host` is refused (421), against DNS rebinding.",
    )

    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("DATABASE_URL", "AGENTIC_RAG_DATABASE_URL"),
        description="PostgreSQL with pgvector; without it an embedded server runs in data_dir.",
    )
    database_pool_size: int = Field(10, description="Most database connections per process.")
    database_statement_timeout_seconds: float = Field(
        15.0,
        gt=0,
        description="Longest a statement may wait for the database's answer (client side: it "
        "bounds a frozen database too); past it, a call is refused to retry (-32603, "
        "Retry-After).",
    )
    database_acquire_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Longest a call waits for a free database connection (or a new one) "
        "before it is refused to retry (-32603, Retry-After).",
    )
    postgres_shared_buffers_mb: int | None = Field(
        None,
        ge=16,
        description="The embedded PostgreSQL's shared_buffers, MB; unset: a quarter of the "
        "memory, at most 4096.",
    )

    max_body_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="Largest request body accepted (A2A and MCP); files travel in it as FileParts.",
    )
    max_json_depth: int = Field(64, description="Deepest JSON nesting accepted in a request.")
    http_max_head_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Largest request head (request line and headers) accepted; larger: 431.",
    )
    http_head_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Longest a request head may take to arrive (from the connection's opening, "
        "or the previous response's end); past it the connection is closed.",
    )
    http_keep_alive_seconds: int = Field(
        5, ge=1, description="How long an idle keep-alive connection is kept open."
    )

    workers: int = Field(
        1, ge=1, description="Processes `serve` runs on one port and one database."
    )
    max_running_tasks: int = Field(4096, description="Skills running at once in this process.")
    worker_sweep_seconds: float = Field(
        10.0,
        description="How often a worker looks for unfinished tasks of workers that are gone.",
    )
    worker_lease_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a worker that lost its database connection keeps its tasks: "
        "others take them over only once its lease has been gone this long.",
    )

    push_allow_private: HostList = Field(
        default_factory=list,
        description="Hosts or CIDRs that push webhooks may reach despite the SSRF guard.",
    )
    push_max_attempts: int = Field(5, description="Deliveries tried per push notification.")
    push_timeout_seconds: float = Field(10.0, description="Timeout of one push delivery.")

    insecure: bool = Field(
        False, description="Serve a non-loopback address without credentials (open to anyone)."
    )
    require_auth: bool = Field(
        False, description="Demand credentials even on loopback with none configured yet."
    )
    jwt_secret: SecretStr | None = Field(None, description="Accept HS256 JWTs signed with this.")
    jwt_jwks_url: str | None = Field(None, description="Accept JWTs signed by keys from this JWKS.")
    jwt_algorithm: Literal["RS256", "ES256"] = Field(
        "RS256", description="The one algorithm accepted from the JWKS."
    )
    jwt_issuer: str | None = Field(None, description="Required `iss` of every JWT.")
    jwt_audience: str | None = Field(None, description="Required `aud` of every JWT.")
    jwt_tenant_claim: str = Field("tenant", description="The JWT claim naming the tenant.")
    jwt_scopes_claim: str = Field(
        "scope", description="The JWT claim with scopes (space-separated or a list)."
    )
    jwt_groups_claim: str = Field(
        "tool_groups",
        description="The JWT claim with the groups of tools the token selects (space-separated "
        "or a list); a token without it selects none: every group offered.",
    )

    redis_url: str | None = Field(
        None,
        validation_alias=AliasChoices("REDIS_URL", "AGENTIC_RAG_REDIS_URL"),
        description="Redis for state shared by workers (rate limits); in-process without it.",
    )
    rate_limit_per_minute: int = Field(600, description="Requests per credential per minute.")
    rate_limit_burst: int = Field(60, description="Requests per credential in any one second.")
    rate_limit_tenants: Annotated[dict[str, TenantLimit], NoDecode] = Field(
        default_factory=dict,
        description='Per-tenant overrides, JSON: {"acme": {"per_minute": 6000, "burst": 200}}.',
    )
    auth_failures_per_minute: int = Field(
        20, description="Failed authentications allowed per client address per minute."
    )

    log_format: Literal["json", "text"] | None = Field(
        None, description="`json` or `text`; unset: text when stdout is a terminal, else json."
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "info", description="Least severe level logged (uvicorn's access lines are `info`)."
    )
    metrics_enabled: bool = Field(True, description="Serve Prometheus metrics at `/metrics`.")
    metrics_token: SecretStr | None = Field(
        None, description="When set, `/metrics` requires `Authorization: Bearer <token>`."
    )

    agent_name: str = Field("agentic-rag", description="The Agent Card's `name`.")
    agent_description: str = Field(
        "A knowledge agent: ask a question in plain text, send a URL to ingest it, or call a "
        'skill with a DataPart {"skill": name, "arguments": {...}} (the skill help lists them).',
        description="The Agent Card's `description`.",
    )

    embedding_provider: Literal["local", "openai"] = Field(
        "local",
        description="`local`: all-MiniLM-L6-v2 on this machine; `openai`: an OpenAI-compatible "
        "embeddings endpoint (OpenAI, Ollama, vLLM, TEI).",
    )
    embedding_url: str | None = Field(
        None, description="Base URL of the embeddings API (provider `openai`), e.g. .../v1."
    )
    embedding_model: str | None = Field(None, description="Embedding model (provider `openai`).")
    embedding_api_key: SecretStr | None = Field(None, description="Key of the embeddings API.")
    embedding_dimension: int | None = Field(
        None, ge=1, description="Vector size (provider `openai`); found by asking when unset."
    )
    embedding_max_tokens: int | None = Field(
        None, ge=16, description="Tokens the model reads per text: 256 locally, 512 for `openai`."
    )
    embedding_batch_size: int | None = Field(None, ge=1, description="Texts per embedding call.")
    chunk_overlap_tokens: int = Field(
        32, ge=0, description="Tokens shared by consecutive chunks of one long section."
    )

    llm_base_url: str | None = Field(
        None, description="OpenAI-compatible chat API (OpenAI, Ollama, vLLM, llama.cpp server)."
    )
    llm_model: str | None = Field(None, description="Chat model for answers and reranking.")
    llm_small_model: str | None = Field(
        None, description="Chat model for the graph's lighter prompts; `llm_model` when unset."
    )
    llm_api_key: SecretStr | None = Field(None, description="Key of the chat API.")
    llm_structured_output: StructuredOutput = Field(
        "json_schema",
        description="How the chat API is given a reply's JSON schema: `json_schema` (OpenAI, "
        "vLLM, Ollama, a llama.cpp server), or `json_object` with the schema beside it "
        "(llama-cpp-python's server, which ignores `json_schema`).",
    )
    llm_local: bool = Field(
        False,
        description="Run the LLM in this process with llama.cpp (the `local-llm` extra): "
        "Qwen2.5-Coder-1.5B-Instruct, or the GGUF of `llm_local_model`.",
    )
    llm_local_model: Path | None = Field(
        None, description="A GGUF model file for `llm_local` instead of the packaged Qwen."
    )
    llm_local_context: int = Field(
        8192, ge=512, description="Tokens of context of the local model (prompt and reply)."
    )
    llm_local_max_tokens: int = Field(
        2048,
        ge=16,
        description="Most tokens of one reply of the local model, whatever a request asks: "
        "a small model can repeat itself until its context is full.",
    )
    use_client_model: bool = Field(
        False,
        description="Without an LLM, answer (and grade, extract) with the MCP client's own "
        "model through sampling, when the client offers it, unless a call says "
        "`use_client_model: false`: the passages are sent to the client's model.",
    )
    reranker_directory: Path | None = Field(
        None,
        description="A local ONNX cross-encoder (model.onnx, tokenizer.json) for the "
        "`cross-encoder` reranker.",
    )

    ingest_allow_private: HostList = Field(
        default_factory=list,
        description="Hosts or CIDRs that ingestion may fetch despite the SSRF guard (intranets).",
    )
    ingest_directory: Path | None = Field(
        None,
        description="Where `ingest_pdf` reads files by path: each tenant only from its own "
        "subdirectory, named as the tenant (<directory>/<tenant>/...).",
    )
    ingest_max_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="Largest resource one ingestion fetch reads."
    )
    ingest_timeout_seconds: float = Field(30.0, gt=0, description="Timeout of one fetch.")
    ingest_host_interval_seconds: float = Field(
        1.0, ge=0, description="Least time between two requests to one host (or its Crawl-delay)."
    )
    ingest_max_pages: int = Field(1000, ge=1, description="Most pages one crawl may ask for.")
    youtube_proxy_url: str | None = Field(
        None, description="HTTP(S) proxy for YouTube, for networks whose addresses YouTube blocks."
    )
    youtube_cookies_file: Path | None = Field(
        None, description="A Netscape cookies file for YouTube (signed-in transcripts)."
    )
    graph_url: str | None = Field(
        None,
        description="A FalkorDB server for the knowledge graph (falkor://, falkors://, redis://, "
        "rediss:// or unix:// URL); without it an embedded FalkorDB runs in data_dir.",
    )
    graph_embedded: bool = Field(
        False,
        description="With an external DATABASE_URL, run the embedded FalkorDB in data_dir all "
        "the same: only for a database one server uses, since each server sharing it would keep "
        "a graph of its own (without this `serve` refuses to start).",
    )
    graph_ingest_concurrency: int = Field(
        4, ge=1, description="Queued graph episodes one process extracts at once."
    )
    graph_ingest_per_namespace: int = Field(
        1,
        ge=1,
        description="Episodes of one graph namespace extracted at once, across all processes; "
        "1 keeps them in the order they were added.",
    )
    graph_ingest_max_attempts: int = Field(
        3, ge=1, description="Tries of a graph episode before it is marked failed."
    )
    graph_ingest_retry_seconds: float = Field(
        30.0, ge=0, description="Pause before a failed graph episode is tried again."
    )
    graph_ingest_documents: bool = Field(
        False,
        description="Documents stored by the ingest skills also become graph episodes "
        "(extracted by the LLM, so it needs one).",
    )
    trajectory_retention_days: int = Field(
        30, ge=1, description="How long explain_answer can replay a retrieval."
    )
    upstream_mcp: Annotated[list[UpstreamMcp], NoDecode] = Field(
        default_factory=list,
        description=(
            "MCP servers whose tools are offered as skills `<name>_<tool>`, as JSON: "
            '[{"name": "graphiti", "url": "http://host:8000/mcp", "headers": {...}, '
            '"namespace_arguments": ["group_id", "group_ids"], "namespace_prefix": ""}]; '
            "headers are never logged or stored."
        ),
    )
    upstream_mcp_retry_seconds: float = Field(
        30.0, gt=0, description="How often an upstream MCP server that did not answer is tried."
    )
    mcp_tool_groups: Annotated[list[ToolGroup], NoDecode] = Field(
        default_factory=list,
        description="The groups of tools MCP clients see and may call, comma-separated "
        "(knowledge, ingest, graph, network, admin, graphiti-compat, upstream); empty: every "
        "group but graphiti-compat (Graphiti's older tool names). An API key's groups narrow it.",
    )
    mcp_sessions: bool = Field(
        True,
        description="Give MCP clients of 2025-11-25 that initialize a session (Mcp-Session-Id), "
        "for elicitation, sampling and resources/subscribe; only with one worker. Behind a load "
        "balancer of several replicas, route by Mcp-Session-Id or set false.",
    )
    mcp_session_idle_seconds: float = Field(
        1800.0,
        gt=0,
        description="An MCP session with no request in flight and no open GET stream for this "
        "long is closed (its id then answers 404, and the client initializes again).",
    )
    mcp_sessions_per_tenant: int = Field(
        64, ge=1, description="MCP sessions one tenant may hold at once (one more is HTTP 429)."
    )

    peers_allow_private: HostList = Field(
        default_factory=list,
        description="Hosts or CIDRs of peer agents reachable despite the SSRF guard (intranets).",
    )
    peer_heartbeat_interval_seconds: float = Field(
        30.0, gt=0, description="How often peers send heartbeats; probes of the others, as often."
    )
    peer_heartbeat_timeout_seconds: float = Field(
        60.0, gt=0, description="A peer not heard from for this long is marked unhealthy."
    )
    peer_credentials: Annotated[dict[str, dict[str, dict[str, SecretStr]]], NoDecode] = Field(
        default_factory=dict,
        description=(
            "Headers sent to a peer's origin (scheme://host:port) on behalf of one tenant only, "
            'as JSON, tenant -> origin -> headers: {"acme": {"https://agent.example:443": '
            '{"Authorization": "Bearer ..."}}}; never stored. Other tenants send none.'
        ),
    )
    session_idle_seconds: float = Field(
        6 * 3600.0, gt=0, description="An A2A context (session) expires after this long idle."
    )
    session_limit_enabled: bool = Field(
        False, description="Cap the active sessions of each tenant at `session_limit`."
    )
    session_limit: int = Field(
        100, ge=1, description="Active sessions per tenant when the cap is switched on."
    )

    delegation_poll_seconds: float = Field(
        1.0, gt=0, description="How often a delegated task is polled on a peer that cannot stream."
    )
    delegation_backoff_seconds: float = Field(
        0.5, gt=0, description="First wait before a peer that was unavailable is tried again."
    )
    delegation_backoff_max_seconds: float = Field(
        30.0, gt=0, description="Longest wait between two tries of an unavailable peer."
    )
    delegation_request_timeout_seconds: float = Field(
        30.0, gt=0, description="Timeout of one request to a peer (a stream may last longer)."
    )

    @field_validator(
        "push_allow_private",
        "ingest_allow_private",
        "peers_allow_private",
        "allowed_hosts",
        mode="before",
    )
    @classmethod
    def _host_list(cls, value: object) -> object:
        """A comma-separated list, or a JSON list."""
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            return _json_setting(value, list, HOST_LIST_FORMAT)
        return [item.strip() for item in value.split(",") if item.strip()]

    @field_validator(
        "push_allow_private", "ingest_allow_private", "peers_allow_private", mode="after"
    )
    @classmethod
    def _hosts_are_hosts(cls, value: list[str]) -> list[str]:
        try:
            for entry in value:
                allow_list_entry(entry)  # the SSRF guard's rules (hosts.py)
        except ValueError as exc:
            raise ValueError(f"{exc}; expected {HOST_LIST_FORMAT}") from None
        return value

    @field_validator("allowed_hosts", mode="after")
    @classmethod
    def _names_are_names(cls, value: list[str]) -> list[str]:
        names = [entry.strip().lower().removesuffix(".") for entry in value]
        for entry, name in zip(value, names, strict=True):
            if not (is_host_name(name) or _is_address(name)):
                raise ValueError(
                    f"{entry!r} is not a host name: expected names such as rag.example.com, "
                    "without scheme or port, comma-separated or a JSON list"
                )
        return names

    @field_validator("upstream_mcp", mode="before")
    @classmethod
    def _upstreams_json(cls, value: object) -> object:
        form = 'a JSON list: [{"name": "graphiti", "url": "http://host:8000/mcp"}]'
        return _json_setting(value, list, form) if isinstance(value, str) else value

    @field_validator("rate_limit_tenants", mode="before")
    @classmethod
    def _tenant_limits_json(cls, value: object) -> object:
        form = 'a JSON object: {"acme": {"per_minute": 6000, "burst": 200}}'
        return _json_setting(value, dict, form) if isinstance(value, str) else value

    @field_validator("peer_credentials", mode="before")
    @classmethod
    def _credentials_json(cls, value: object) -> object:
        if isinstance(value, str):
            value = _json_setting(value, dict, f"a JSON object: {_CREDENTIALS_FORM}")
        if isinstance(value, dict) and any(_looks_like_origin(key) for key in value):
            # The form before credentials had tenants: read as it was, every tenant would send
            # them (a confused deputy), so it is refused, saying how to name their tenant.
            raise ValueError(
                "is keyed by tenant now, then origin: "
                f"{_CREDENTIALS_FORM}; an origin at the top level (the earlier form) gave "
                "its headers to every tenant: put it under the tenant they belong to"
            )
        return value

    @field_validator("peer_credentials")
    @classmethod
    def _origins_and_headers(
        cls, value: dict[str, dict[str, dict[str, SecretStr]]]
    ) -> dict[str, dict[str, dict[str, SecretStr]]]:
        for tenant, origins in value.items():
            if not tenant:
                raise ValueError("a tenant's name is not empty")
            _check_origins(tenant, origins)
        return value

    @field_validator("upstream_mcp")
    @classmethod
    def _distinct_upstreams(cls, value: list[UpstreamMcp]) -> list[UpstreamMcp]:
        names = [upstream.name for upstream in value]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream MCP servers need distinct names, not {names}")
        return value

    @field_validator("mcp_tool_groups", mode="before")
    @classmethod
    def _comma_groups(cls, value: object) -> object:
        """A comma-separated list, or a JSON list."""
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            return _json_setting(value, list, 'knowledge,graph or a JSON list (["knowledge"])')
        return [item.strip() for item in value.split(",") if item.strip()]

    @field_validator("youtube_cookies_file")
    @classmethod
    def _cookies_load(cls, value: Path | None) -> Path | None:
        if value is not None:
            load_cookies(value)
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lowercase_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _jwt_is_bound(self) -> "Settings":
        if self.jwt_configured() and not (self.jwt_issuer and self.jwt_audience):
            raise ValueError(
                "JWT needs AGENTIC_RAG_JWT_ISSUER and AGENTIC_RAG_JWT_AUDIENCE: every token's "
                "iss and aud are checked"
            )
        return self

    @model_validator(mode="after")
    def _one_llm(self) -> "Settings":
        if self.llm_local and self.llm_base_url:
            raise ValueError(
                "AGENTIC_RAG_LLM_LOCAL and AGENTIC_RAG_LLM_BASE_URL both name an LLM: keep one"
            )
        return self

    @model_validator(mode="after")
    def _graph_documents_need_an_llm(self) -> "Settings":
        if self.graph_ingest_documents and not self.llm_configured():
            raise ValueError(
                "AGENTIC_RAG_GRAPH_INGEST_DOCUMENTS needs an LLM to extract the documents' "
                "entities and facts: set AGENTIC_RAG_LLM_LOCAL=true (the local-llm extra), or "
                "AGENTIC_RAG_LLM_BASE_URL and AGENTIC_RAG_LLM_MODEL"
            )
        return self

    def llm_configured(self) -> bool:
        return self.llm_local or bool(self.llm_base_url and self.llm_model)

    def jwt_configured(self) -> bool:
        return self.jwt_secret is not None or self.jwt_jwks_url is not None

    def base_url(self) -> str:
        """The public URL of the JSON-RPC endpoint, without a trailing slash."""
        if self.public_url:
            return self.public_url.rstrip("/")
        return f"http://{self.host}:{self.port}"


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def load_cookies(path: Path) -> MozillaCookieJar:
    """The cookies of a Netscape cookies file (what browser extensions export as cookies.txt),
    session cookies included; expired ones are loaded but never sent."""
    jar = MozillaCookieJar()
    try:
        jar.load(str(path), ignore_discard=True, ignore_expires=True)
    except LoadError as exc:
        raise ValueError(f"{path} is not a Netscape cookies file: {exc}") from None
    except OSError as exc:
        raise ValueError(f"cannot read the cookies file {path}: {exc.strerror}") from None
    for cookie in jar:
        if cookie.expires == 0:  # how exporters write a session cookie; 0 would be expired
            cookie.expires, cookie.discard = None, True
    return jar


def _json_setting(text: str, kind: type, form: str) -> object:
    """`text` read as JSON of `kind`; a ValueError naming the expected `form` otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:  # the value is not repeated: it may hold secrets
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos}); expected {form}") from None
    if not isinstance(value, kind):
        raise ValueError(f"expected {form}, not {type(value).__name__}")
    return value


def env_name(field: str) -> str:
    """The environment variable of the setting `field` (or of its alias, as errors name it)."""
    if field not in Settings.model_fields:
        return field.upper()
    alias = Settings.model_fields[field].validation_alias
    return str(
        alias.choices[0] if isinstance(alias, AliasChoices) else f"AGENTIC_RAG_{field}"
    ).upper()


def environment(overrides: dict[str, Any]) -> dict[str, str]:
    """The environment variables that make `Settings()` take `overrides` (field: value): how
    the command line hands its settings to the worker processes it starts."""
    return {
        env_name(name): json.dumps(value) if isinstance(value, list | dict) else str(value)
        for name, value in overrides.items()
    }


def setting_errors(invalid: ValidationError) -> list[tuple[str | None, str]]:
    """(the setting's field, or None for a rule over several, what is wrong) of each error.

    Messages of our own validators lose the "Value error, " pydantic puts before them.
    """
    errors = []
    for error in invalid.errors(include_url=False):
        cause = error.get("ctx", {}).get("error")
        message = str(cause) if error["type"] == "value_error" and cause else error["msg"]
        errors.append((str(error["loc"][0]) if error["loc"] else None, message))
    return errors


def split_graph_refusal(settings: Settings) -> str | None:
    """Why `serve` refuses these settings' graph, or None: an embedded FalkorDB beside an
    external database. Every server sharing that database would start one of its own, and a
    fact added through one server would not be found through another (a split brain)."""
    if settings.database_url is None or settings.graph_url or settings.graph_embedded:
        return None
    return (
        "refusing to start an embedded FalkorDB with an external DATABASE_URL: each server "
        "sharing that database would keep a knowledge graph of its own; set "
        "AGENTIC_RAG_GRAPH_URL to a FalkorDB server every replica reaches, or "
        "AGENTIC_RAG_GRAPH_EMBEDDED=true if this server is the only one on that database"
    )


def shared_limits_warning(settings: Settings) -> str | None:
    """Why rate limits are not what they say, or None: without REDIS_URL each process counts
    its own, and a credential may use each worker's and each replica's whole limit."""
    if settings.redis_url:
        return None
    counters = []
    if settings.workers > 1:
        counters.append(f"each of the {settings.workers} workers")
    if settings.database_url is not None:
        counters.append("each replica sharing DATABASE_URL")
    if not counters:
        return None
    return (
        f"rate limits are counted by {' and by '.join(counters)} without REDIS_URL: a "
        "credential can make its limit's worth of requests to every one of them; set "
        "REDIS_URL to count them together"
    )


def stores(settings: Settings, *, graph: bool = True) -> str:
    """Where each store of these settings is, embedded or external, URLs without credentials
    (`graph` False: an app without the knowledge graph): what an operator reads to tell a
    replica that shares every store from one that does not."""
    data_dir = settings.data_dir.resolve()
    database = (
        f"external {without_credentials(settings.database_url)}"
        if settings.database_url
        else f"embedded in {data_dir / 'postgres'}"
    )
    limits = (
        f"Redis {without_credentials(settings.redis_url)}"
        if settings.redis_url
        else "in this process"
    )
    where = (
        f"external {without_credentials(settings.graph_url)}"
        if settings.graph_url
        else f"embedded in {data_dir / 'falkordb'}"
    )
    return (
        f"stores: database {database}; rate limits {limits}; graph {where if graph else 'none'}; "
        "work queue in the database (tasks and graph episodes)"
    )


_SECRET_PARAMETER = re.compile(r"pass|secret|token|key", re.IGNORECASE)


def without_credentials(url: str) -> str:
    """`url` without its user, password and any query parameter that may hold a secret."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query) if not _SECRET_PARAMETER.search(k)], safe="/"
    )
    return f"{parts.scheme}://{host}{parts.path}" + (f"?{query}" if query else "")


def keys_create_command(settings: Settings) -> str:
    """The command that creates an API key in the database `settings` name."""
    command = "agentic-rag keys create --tenant NAME"
    if settings.database_url is None and settings.data_dir != DEFAULT_DATA_DIR:
        command += f" --data-dir {shlex.quote(str(settings.data_dir))}"
    return command
