"""`agentic-rag doctor`: is this machine ready to run the server, and if not, what to fix.

Each check is an async function from the `Context` to result lines, listed in `CHECKS` in the
order they run; a check may use what an earlier one found (the settings, the database). Add a
check by writing one and appending it. A result is `ok`, `warn` (runs, but look at it) or
`fail` (serve will not work); any `fail` makes the exit code 1.
"""

import asyncio
import errno
import json
import os
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
from pydantic import ValidationError

from agentic_rag.config import (
    Settings,
    env_name,
    keys_create_command,
    setting_errors,
    split_graph_refusal,
)
from agentic_rag.observability.logging import redact
from agentic_rag.security.auth import is_loopback
from agentic_rag.storage.database import embedded_postgres
from agentic_rag.storage.embedded import EmbeddedPostgres, installation

Status = Literal["ok", "warn", "fail"]

CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Result:
    check: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.check:<10} {self.detail}"
        return redact(f"{text} -- fix: {self.fix}" if self.fix else text)


@dataclass
class Context:
    """What the checks share: the command line's overrides and what earlier checks found."""

    overrides: dict[str, Any] = field(default_factory=dict)
    settings: Settings | None = None
    pool: asyncpg.Pool | None = None  # the database, when the database check reached it
    postgres: EmbeddedPostgres | None = None  # the embedded server, when the check started it
    database_problem: str = ""  # why there is no pool, for the checks that need one
    fresh: bool = False  # the embedded database does not exist yet: it holds nothing


type Check = Callable[[Context], Awaitable[list[Result]]]


# -- configuration ----------------------------------------------------------------------------


async def check_config(ctx: Context) -> list[Result]:
    try:
        settings = Settings(**ctx.overrides)
    except ValidationError as invalid:
        return [
            Result(
                "config",
                "fail",
                f"{env_name(field)}: {message}" if field else message,
                f"correct {env_name(field) if field else 'them'} "
                "(docs/operations.md lists every setting)",
            )
            for field, message in setting_errors(invalid)
        ]
    ctx.settings = settings
    database = (
        f"DATABASE_URL ({_describe_dsn(settings.database_url)})"
        if settings.database_url
        else f"embedded PostgreSQL in {(settings.data_dir / 'postgres').resolve()}"
    )
    return [
        Result(
            "config",
            "ok",
            f"settings load: bind {settings.host}:{settings.port}, database {database}, "
            f"log format {settings.log_format or 'auto'}, level {settings.log_level}",
        )
    ]


def _describe_dsn(dsn: str) -> str:
    """Where a DSN points, without its password."""
    parts = urlsplit(dsn)
    host = parts.hostname or ",".join(parse_qs(parts.query).get("host", [])) or "local socket"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}/{parts.path.lstrip('/') or parts.username or ''}"


# -- database ---------------------------------------------------------------------------------

_MIGRATIONS = resources.files("agentic_rag.storage").joinpath("migrations")
_PGVECTOR_CONTROL = Path("share") / "extension" / "vector.control"  # in the installation


def _known_migrations() -> list[str]:
    return sorted(f.name for f in _MIGRATIONS.iterdir() if f.name.endswith(".sql"))


def _embedded_has_pgvector() -> bool:
    return (installation() / _PGVECTOR_CONTROL).exists()


def _writable_dir(path: Path) -> Path | None:
    """The directory that would hold `path` if it is missing and writable, else None."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate if candidate.is_dir() and os.access(candidate, os.W_OK) else None
    return None


async def check_database(ctx: Context) -> list[Result]:
    settings = ctx.settings
    if settings is None:
        ctx.database_problem = "not checked: the configuration does not load"
        return [Result("database", "warn", ctx.database_problem, "fix the configuration first")]
    if settings.database_url:
        dsn = settings.database_url
        where = f"DATABASE_URL ({_describe_dsn(dsn)})"
        fix = "start PostgreSQL there, or correct DATABASE_URL"
    else:
        pgdata = (settings.data_dir / "postgres").resolve()
        if not (pgdata / "PG_VERSION").exists():
            ctx.fresh = True
            ctx.database_problem = "not checked: the embedded database does not exist yet"
            parent = _writable_dir(pgdata)
            if parent is None:
                return [
                    Result(
                        "database",
                        "fail",
                        f"no embedded database in {pgdata}, and it cannot be created there",
                        f"make {settings.data_dir.resolve()} writable, or set "
                        "AGENTIC_RAG_DATA_DIR (--data-dir) or DATABASE_URL",
                    )
                ]
            vector = _embedded_has_pgvector()
            return [
                Result(
                    "database",
                    "ok",
                    f"no embedded database yet: `agentic-rag serve` creates it in {pgdata}",
                ),
                Result(
                    "pgvector",
                    "ok" if vector else "fail",
                    "bundled with the embedded PostgreSQL"
                    if vector
                    else "missing from the embedded PostgreSQL",
                    "" if vector else "reinstall the embedded-postgres package",
                ),
            ]
        where = f"embedded PostgreSQL in {pgdata}"
        fix = f"read {pgdata / 'log'}; if no server runs, remove a stale {pgdata}/postmaster.pid"
        try:
            ctx.postgres = embedded_postgres(settings)
            dsn = await asyncio.to_thread(ctx.postgres.start)
        except Exception as exc:
            ctx.database_problem = f"not checked: {where} does not start"
            return [Result("database", "fail", f"{where} does not start: {exc}", fix)]
        where = f"{where} ({dsn})"
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            ctx.pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    except Exception as exc:
        ctx.database_problem = "not checked: the database is unreachable"
        problem = "no answer" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        return [Result("database", "fail", f"cannot connect to {where}: {problem}", fix)]
    assert ctx.pool is not None
    try:
        async with ctx.pool.acquire() as conn:
            version = await conn.fetchval("SHOW server_version")
            extension = await conn.fetchrow(
                "SELECT default_version, installed_version FROM pg_available_extensions"
                " WHERE name = 'vector'"
            )
            has_table = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
            applied = (
                {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
                if has_table
                else set()
            )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return [Result("database", "fail", f"{where} fails a query: {exc}", fix)]
    results = [Result("database", "ok", f"reachable: {where}, PostgreSQL {version}")]
    if extension is None:
        results.append(
            Result(
                "pgvector",
                "fail",
                "the vector extension is not available on this PostgreSQL",
                "install pgvector for this PostgreSQL version (package postgresql-NN-pgvector, "
                "or the pgvector/pgvector image)",
            )
        )
    else:
        state = (
            f"installed {extension['installed_version']}"
            if extension["installed_version"]
            else "not created yet (the first migration creates it)"
        )
        results.append(
            Result("pgvector", "ok", f"available ({extension['default_version']}), {state}")
        )
    known = _known_migrations()
    pending = [m for m in known if m not in applied]
    unknown = sorted(applied - set(known))
    if unknown:
        results.append(
            Result(
                "migrations",
                "warn",
                f"the database has migrations this version does not know: {', '.join(unknown)}",
                "a newer agentic-rag used this database: run that version, or restore a backup",
            )
        )
    elif pending:
        results.append(
            Result(
                "migrations",
                "warn",
                f"{len(pending)} of {len(known)} pending: {', '.join(pending)}",
                "`agentic-rag serve` applies them at start (back up first: docs/operations.md)",
            )
        )
    else:
        results.append(Result("migrations", "ok", f"all {len(known)} applied"))
    return results


# -- exposure: the bind address against the credentials --------------------------------------


async def _active_api_keys(ctx: Context) -> bool | None:
    """Whether active API keys exist; None when that cannot be known (no database)."""
    if ctx.pool is None:
        return False if ctx.fresh else None
    from agentic_rag.security.api_keys import ApiKeyStore

    try:
        return await ApiKeyStore(ctx.pool).any_active()
    except asyncpg.UndefinedTableError:  # the migration that creates the table is pending
        return False


async def check_exposure(ctx: Context) -> list[Result]:
    settings = ctx.settings
    if settings is None:
        return [Result("exposure", "warn", "not checked: the configuration does not load")]
    keys = await _active_api_keys(ctx)
    credentials = []
    if settings.jwt_configured():
        credentials.append("JWT")
    if keys:
        credentials.append("API keys")
    open_mode = not credentials and not settings.require_auth
    results = []
    host = settings.host
    if is_loopback(host):
        mode = (
            "open local mode" if open_mode else f"credentials required ({', '.join(credentials)})"
        )
        results.append(Result("exposure", "ok", f"bound to loopback {host}: {mode}"))
    elif credentials:
        results.append(
            Result("exposure", "ok", f"{host} requires credentials ({', '.join(credentials)})")
        )
    elif settings.require_auth:
        results.append(
            Result(
                "exposure",
                "warn",
                f"{host} requires credentials, but none exist yet: every request is refused",
                f"create one: {keys_create_command(settings)} --scopes read,write",
            )
        )
    elif keys is None:
        results.append(
            Result(
                "exposure",
                "warn",
                f"{host} is not loopback; whether API keys exist is unknown "
                f"({ctx.database_problem or 'no database'})",
                "fix the database, then run doctor again",
            )
        )
    elif settings.insecure:
        results.append(
            Result(
                "exposure",
                "warn",
                f"INSECURE: {host} is served without credentials; anyone who reaches it can use it",
                f"create an API key ({keys_create_command(settings)}) or configure JWT",
            )
        )
    else:
        results.append(
            Result(
                "exposure",
                "fail",
                f"`serve` refuses to bind {host} without credentials",
                f"create an API key ({keys_create_command(settings)}), configure JWT "
                "(AGENTIC_RAG_JWT_SECRET or AGENTIC_RAG_JWT_JWKS_URL), bind 127.0.0.1, "
                "or pass --insecure",
            )
        )
    results.append(_metrics_exposure(settings, open_mode))
    return results


def _metrics_exposure(settings: Settings, open_mode: bool) -> Result:
    if not settings.metrics_enabled:
        return Result("metrics", "ok", "disabled (AGENTIC_RAG_METRICS_ENABLED=false)")
    if settings.metrics_token is not None:
        return Result("metrics", "ok", "/metrics requires the metrics bearer token")
    if not open_mode:
        return Result("metrics", "ok", "/metrics requires a credential with the admin scope")
    if is_loopback(settings.host):
        return Result("metrics", "ok", "/metrics is open, on loopback only")
    return Result(
        "metrics",
        "warn",
        f"/metrics is open to anyone who reaches {settings.host}",
        "set AGENTIC_RAG_METRICS_TOKEN, or AGENTIC_RAG_METRICS_ENABLED=false",
    )


# -- redis, models ----------------------------------------------------------------------------


async def check_redis(ctx: Context) -> list[Result]:
    settings = ctx.settings
    if settings is None or not settings.redis_url:
        return [Result("redis", "ok", "not configured: rate limits are counted per process")]
    if (problem := await _redis_problem(settings.redis_url)) is not None:
        return [
            Result(
                "redis",
                "fail",
                f"REDIS_URL does not answer: {problem}",
                "start Redis there, correct REDIS_URL, or unset it",
            )
        ]
    return [Result("redis", "ok", "REDIS_URL answers")]


async def check_graph(ctx: Context) -> list[Result]:
    """The knowledge graph's FalkorDB: shared by every server on an external database (what
    `serve` demands, config.split_graph_refusal), and answering."""
    settings = ctx.settings
    if settings is None:
        return [Result("graph", "warn", "not checked: the configuration does not load")]
    if split_graph_refusal(settings) is not None:
        return [
            Result(
                "graph",
                "fail",
                "`serve` refuses an embedded FalkorDB beside an external DATABASE_URL: each "
                "server sharing that database would keep a graph of its own",
                "set AGENTIC_RAG_GRAPH_URL to a FalkorDB server every replica reaches, or "
                "AGENTIC_RAG_GRAPH_EMBEDDED=true if this server is the only one on that database",
            )
        ]
    if settings.graph_url is None:
        where = (settings.data_dir / "falkordb").resolve()
        return [Result("graph", "ok", f"embedded FalkorDB in {where}")]
    # FalkorDB's own schemes name Redis connections (falkordb.FalkorDB.from_url).
    url = re.sub(r"^falkor(s?)://", r"redis\1://", settings.graph_url)
    if (problem := await _redis_problem(url)) is not None:
        return [
            Result(
                "graph",
                "fail",
                f"AGENTIC_RAG_GRAPH_URL does not answer: {problem}",
                "start FalkorDB there, or correct AGENTIC_RAG_GRAPH_URL",
            )
        ]
    return [Result("graph", "ok", "AGENTIC_RAG_GRAPH_URL answers")]


async def _redis_problem(url: str) -> str | None:
    """Why the Redis-protocol server at `url` does not answer a PING, or None."""
    import redis.asyncio as redis

    client = redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            await client.ping()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        await client.aclose()
    return None


async def check_models(ctx: Context) -> list[Result]:
    settings = ctx.settings
    if settings is None:
        return []
    return [await asyncio.to_thread(_embedding_model, settings), await _llm(settings)]


def _embedding_model(settings: Settings) -> Result:
    if settings.embedding_provider == "openai":
        return Result(
            "models", "ok", f"embeddings by {settings.embedding_model} at {settings.embedding_url}"
        )
    from agentic_rag.embedding.embedders import (
        MODEL_NAME,
        ONNX_SHA256,
        TOKENIZER_SHA256,
        default_model_path,
        default_tokenizer_path,
        verify_sha256,
    )
    from agentic_rag.embedding.errors import EmbeddingError

    try:
        verify_sha256(default_model_path(), ONNX_SHA256)
        verify_sha256(default_tokenizer_path(), TOKENIZER_SHA256)
    except EmbeddingError as exc:
        return Result("models", "fail", str(exc), "reinstall the service: make run")
    return Result("models", "ok", f"{MODEL_NAME} installed, its files verified by sha256")


async def _llm(settings: Settings) -> Result:
    if settings.llm_local:
        return await asyncio.to_thread(_local_llm, settings)
    if settings.llm_base_url and settings.llm_model:
        return await _llm_endpoint(settings.llm_base_url, settings.llm_model, settings)
    return Result(
        "llm",
        "ok",
        "none configured: answers are extractive and the graph takes facts from add_triplet "
        "only (AGENTIC_RAG_LLM_LOCAL=true or AGENTIC_RAG_LLM_BASE_URL enable one)",
    )


def _local_llm(settings: Settings) -> Result:
    from agentic_rag.llm.local import INSTALL_EXTRA, PACKAGED_NAME, cache_directory, unavailable

    problem = unavailable(settings)
    if problem is not None:
        fix = (
            "correct AGENTIC_RAG_LLM_LOCAL_MODEL"
            if settings.llm_local_model is not None
            else INSTALL_EXTRA
        )
        return Result("llm", "fail", problem, fix)
    if settings.llm_local_model is not None:
        return Result("llm", "ok", f"the local model {settings.llm_local_model}")
    joined = cache_directory() / f"{PACKAGED_NAME}.gguf"
    where = f"joined at {joined}" if joined.exists() else f"joined into {joined} on the first start"
    return Result("llm", "ok", f"the local model {PACKAGED_NAME}: installed, {where}")


async def _llm_endpoint(base_url: str, model: str, settings: Settings) -> Result:
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT_SECONDS, headers=headers) as http:
            answer = await http.get(f"{base_url.rstrip('/')}/models")
    except httpx.HTTPError as exc:
        return Result(
            "llm",
            "fail",
            f"the LLM endpoint {base_url} does not answer: {type(exc).__name__}: {exc}",
            "start it, or correct AGENTIC_RAG_LLM_BASE_URL",
        )
    if answer.status_code in (401, 403):
        return Result(
            "llm",
            "fail",
            f"the LLM endpoint {base_url} refuses the key (HTTP {answer.status_code})",
            "set AGENTIC_RAG_LLM_API_KEY",
        )
    return Result("llm", "ok", f"{model} at {base_url} (it answers)")


# -- port -------------------------------------------------------------------------------------


def _try_bind(host: str, port: int) -> OSError | None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


async def _answers_healthz(host: str, port: int) -> bool:
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    netloc = f"[{probe_host}]" if ":" in probe_host else probe_host
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            response = await client.get(f"http://{netloc}:{port}/healthz")
        return response.status_code == 200 and response.json() == {"status": "ok"}
    except (httpx.HTTPError, ValueError):
        return False


async def check_port(ctx: Context) -> list[Result]:
    settings = ctx.settings
    if settings is None:
        return [Result("port", "warn", "not checked: the configuration does not load")]
    host, port = settings.host, settings.port
    where = f"{host}:{port}"
    other_port = "choose another port (--port or AGENTIC_RAG_PORT)"
    problem = await asyncio.to_thread(_try_bind, host, port)
    if problem is None:
        return [Result("port", "ok", f"{where} is free")]
    if isinstance(problem, socket.gaierror):
        return [Result("port", "fail", f"cannot resolve {host}: {problem}", "correct the host")]
    if problem.errno == errno.EADDRINUSE:
        if await _answers_healthz(host, port):
            return [
                Result(
                    "port",
                    "warn",
                    f"{where} is in use by a running agentic-rag (it answers /healthz)",
                    f"stop that server before starting another here, or {other_port}",
                )
            ]
        return [
            Result(
                "port",
                "fail",
                f"{where} is in use by another program",
                f"stop it, or {other_port}",
            )
        ]
    if problem.errno == errno.EADDRNOTAVAIL:
        return [
            Result(
                "port",
                "fail",
                f"{host} is not an address of this machine",
                "bind 127.0.0.1, 0.0.0.0, or one of this machine's addresses",
            )
        ]
    if problem.errno == errno.EACCES:
        return [
            Result(
                "port",
                "fail",
                f"binding {where} needs privileges",
                "choose a port above 1023 (--port or AGENTIC_RAG_PORT)",
            )
        ]
    return [Result("port", "fail", f"cannot bind {where}: {problem}", other_port)]


CHECKS: list[Check] = [
    check_config,
    check_database,
    check_exposure,
    check_redis,
    check_graph,
    check_models,
    check_port,
]


async def run_checks(overrides: dict[str, Any] | None = None) -> list[Result]:
    ctx = Context(overrides=dict(overrides or {}))
    results: list[Result] = []
    try:
        for check in CHECKS:
            results.extend(await check(ctx))
    finally:
        if ctx.pool is not None:
            await ctx.pool.close()
        if ctx.postgres is not None:
            await asyncio.to_thread(ctx.postgres.stop)  # unless serve uses it too
    return results


def report(results: list[Result], *, as_json: bool) -> str:
    if as_json:
        ok = all(r.status != "fail" for r in results)
        checks = [{k: redact(v) for k, v in asdict(r).items()} for r in results]
        return json.dumps({"ok": ok, "checks": checks}, indent=2)
    return "\n".join(r.line() for r in results)


def main(overrides: dict[str, Any], *, as_json: bool = False) -> int:
    """`agentic-rag doctor`: print the results, exit 1 if any check failed.

    `overrides` are the settings the command line gives; loading them is the first check.
    """
    results = asyncio.run(run_checks(overrides))
    print(report(results, as_json=as_json), flush=True)
    return 1 if any(r.status == "fail" for r in results) else 0
