"""Every setting of the service, read from the environment in one place.

Names are `AGENTIC_RAG_<FIELD>` (for example `AGENTIC_RAG_PUBLIC_URL`), except the two that
deployments conventionally set without a prefix: `DATABASE_URL` and `REDIS_URL`.
"""

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIC_RAG_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path("data")
    public_url: str | None = Field(
        None, description="Base URL peers use to reach this server; the Agent Card's `url`."
    )

    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("DATABASE_URL", "AGENTIC_RAG_DATABASE_URL"),
        description="PostgreSQL with pgvector; without it an embedded server runs in data_dir.",
    )
    database_pool_size: int = 10

    max_body_bytes: int = Field(1_048_576, description="Largest JSON-RPC request body accepted.")
    max_json_depth: int = Field(64, description="Deepest JSON nesting accepted in a request.")

    max_running_tasks: int = Field(4096, description="Skills running at once in this process.")

    push_allow_private: list[str] = Field(
        default_factory=list,
        description="Hosts or CIDRs that push webhooks may reach despite the SSRF guard.",
    )
    push_max_attempts: int = 5
    push_timeout_seconds: float = 10.0

    agent_name: str = "agentic-rag"
    agent_description: str = (
        "A knowledge agent: ask what it can do with plain text, or call a skill with a DataPart "
        '{"skill": name, "arguments": {...}}.'
    )

    def base_url(self) -> str:
        """The public URL of the JSON-RPC endpoint, without a trailing slash."""
        if self.public_url:
            return self.public_url.rstrip("/")
        return f"http://{self.host}:{self.port}"
