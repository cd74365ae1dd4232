"""Every setting of the service, read from the environment in one place.

Names are `AGENTIC_RAG_<FIELD>` (for example `AGENTIC_RAG_PUBLIC_URL`), except the two that
deployments conventionally set without a prefix: `DATABASE_URL` and `REDIS_URL`.
"""

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class TenantLimit(BaseModel):
    per_minute: int
    burst: int


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIC_RAG_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address to bind; non-loopback needs credentials.")
    port: int = Field(8000, description="Port to bind.")
    data_dir: Path = Field(Path("data"), description="Where the embedded PostgreSQL keeps data.")
    public_url: str | None = Field(
        None, description="Base URL peers use to reach this server; the Agent Card's `url`."
    )

    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("DATABASE_URL", "AGENTIC_RAG_DATABASE_URL"),
        description="PostgreSQL with pgvector; without it an embedded server runs in data_dir.",
    )
    database_pool_size: int = Field(10, description="Most database connections per process.")

    max_body_bytes: int = Field(1_048_576, description="Largest JSON-RPC request body accepted.")
    max_json_depth: int = Field(64, description="Deepest JSON nesting accepted in a request.")

    workers: int = Field(
        1, ge=1, description="Processes `serve` runs on one port and one database."
    )
    max_running_tasks: int = Field(4096, description="Skills running at once in this process.")
    worker_sweep_seconds: float = Field(
        10.0,
        description="How often a worker looks for unfinished tasks of workers that are gone.",
    )

    push_allow_private: list[str] = Field(
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

    redis_url: str | None = Field(
        None,
        validation_alias=AliasChoices("REDIS_URL", "AGENTIC_RAG_REDIS_URL"),
        description="Redis for state shared by workers (rate limits); in-process without it.",
    )
    rate_limit_per_minute: int = Field(600, description="Requests per credential per minute.")
    rate_limit_burst: int = Field(60, description="Requests per credential in any one second.")
    rate_limit_tenants: dict[str, TenantLimit] = Field(
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
        "A knowledge agent: ask what it can do with plain text, or call a skill with a DataPart "
        '{"skill": name, "arguments": {...}}.',
        description="The Agent Card's `description`.",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lowercase_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    def jwt_configured(self) -> bool:
        return self.jwt_secret is not None or self.jwt_jwks_url is not None

    def base_url(self) -> str:
        """The public URL of the JSON-RPC endpoint, without a trailing slash."""
        if self.public_url:
            return self.public_url.rstrip("/")
        return f"http://{self.host}:{self.port}"


def environment(overrides: dict[str, Any]) -> dict[str, str]:
    """The environment variables that make `Settings()` take `overrides` (field: value): how
    the command line hands its settings to the worker processes it starts."""
    env = {}
    for name, value in overrides.items():
        alias = Settings.model_fields[name].validation_alias
        key = alias.choices[0] if isinstance(alias, AliasChoices) else f"AGENTIC_RAG_{name}"
        text = json.dumps(value) if isinstance(value, list | dict) else str(value)
        env[str(key).upper()] = text
    return env
