"""The command line: `agentic-rag serve` and friends."""

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentic_rag.config import Settings
from agentic_rag.security.api_keys import ApiKeyStore

log = logging.getLogger("agentic_rag.cli")


SETTING_OPTIONS = ("host", "port", "data_dir", "public_url", "insecure", "log_level", "workers")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gives; the environment and defaults give the rest."""
    given = {name: getattr(args, name, None) for name in SETTING_OPTIONS}
    given["insecure"] = given["insecure"] or None  # an absent --insecure says nothing
    return {name: value for name, value in given.items() if value is not None}


def _serve(args: argparse.Namespace) -> int:
    from agentic_rag.serving import serve

    serve("agentic_rag.app:create_app", _overrides(args))
    return 0


async def _with_keys(settings: Settings, action: Callable[[ApiKeyStore], Awaitable[int]]) -> int:
    from agentic_rag.storage.embedded import start_embedded_postgres
    from agentic_rag.storage.postgres import connect

    dsn = settings.database_url or start_embedded_postgres(settings.data_dir)
    pool = await connect(dsn, size=2)
    try:
        return await action(ApiKeyStore(pool))
    finally:
        await pool.close()


def _keys_create(args: argparse.Namespace) -> int:
    expires = (
        datetime.now(UTC) + timedelta(days=args.expires_in_days) if args.expires_in_days else None
    )
    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]

    async def create(store: ApiKeyStore) -> int:
        try:
            key, record = await store.create(
                args.tenant, scopes, name=args.name, expires_at=expires
            )
        except ValueError as exc:
            print(f"agentic-rag keys create: {exc}", file=sys.stderr)
            return 2
        print(key)
        print(
            f"id {record.id}, tenant {record.tenant}, scopes {','.join(record.scopes)}"
            + (f", expires {record.expires_at:%Y-%m-%d %H:%M} UTC" if record.expires_at else ""),
            file=sys.stderr,
        )
        print("Store the key now: only its hash is kept.", file=sys.stderr)
        return 0

    return asyncio.run(_with_keys(Settings(**_overrides(args)), create))


def _keys_list(args: argparse.Namespace) -> int:
    async def show(store: ApiKeyStore) -> int:
        for key in await store.list(args.tenant):
            state = "active" if key.active else ("revoked" if key.revoked_at else "expired")
            expiry = f"{key.expires_at:%Y-%m-%d}" if key.expires_at else "never"
            print(
                f"{key.id}  {key.tenant:<16} {','.join(key.scopes):<16} expires {expiry:<10} "
                f"{state:<8} {key.name}"
            )
        return 0

    return asyncio.run(_with_keys(Settings(**_overrides(args)), show))


def _keys_revoke(args: argparse.Namespace) -> int:
    async def revoke(store: ApiKeyStore) -> int:
        if await store.revoke(args.id):
            print(f"revoked {args.id}")
            return 0
        print(f"agentic-rag keys revoke: no active key {args.id!r}", file=sys.stderr)
        return 1

    return asyncio.run(_with_keys(Settings(**_overrides(args)), revoke))


def _mcp(args: argparse.Namespace) -> int:
    from agentic_rag.mcp.stdio import run_stdio

    return run_stdio(Settings(**_overrides(args)))


def _doctor(args: argparse.Namespace) -> int:
    from agentic_rag import doctor

    return doctor.main(_overrides(args), as_json=args.json)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentic-rag", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the A2A server")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8000)")
    serve.add_argument("--data-dir", type=Path, help="where embedded data lives (default ./data)")
    serve.add_argument("--public-url", help="the URL peers use to reach this server")
    serve.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error", "critical"],
        help="default AGENTIC_RAG_LOG_LEVEL, else info",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without credentials"
    )
    serve.add_argument(
        "--workers",
        type=int,
        help="processes sharing the port and the database (default AGENTIC_RAG_WORKERS, else 1)",
    )
    serve.set_defaults(run=_serve)

    keys = commands.add_parser("keys", help="manage API keys").add_subparsers(
        dest="keys_command", required=True
    )
    create = keys.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--scopes", default="read,write", help="comma-separated: read,write,admin")
    create.add_argument("--name", default="", help="a note to recognise the key by")
    create.add_argument("--expires-in-days", type=int)
    create.set_defaults(run=_keys_create)
    listing = keys.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--tenant")
    listing.set_defaults(run=_keys_list)
    revoke = keys.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id")
    revoke.set_defaults(run=_keys_revoke)
    for command in (create, listing, revoke):
        command.add_argument("--data-dir", type=Path, help="the embedded data directory")

    mcp = commands.add_parser(
        "mcp",
        help="serve MCP over stdio (bridged to AGENTIC_RAG_URL when set, else in-process)",
    )
    mcp.add_argument("--data-dir", type=Path, help="where embedded data lives (default ./data)")
    # stdout is the protocol: logs go to stderr, and only warnings unless asked.
    mcp.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"]
    )
    mcp.set_defaults(run=_mcp)

    doctor = commands.add_parser(
        "doctor", help="check the configuration, database, models and port; say what to fix"
    )
    doctor.add_argument("--host", help="the address serve would bind")
    doctor.add_argument("--port", type=int, help="the port serve would bind")
    doctor.add_argument("--data-dir", type=Path, help="where embedded data lives")
    doctor.add_argument("--insecure", action="store_true", help="as serve --insecure")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(run=_doctor, log_level="warning")  # logs go to stderr
    args = parser.parse_args(argv)
    logging.basicConfig(level=(getattr(args, "log_level", None) or "info").upper())
    try:
        result: int = args.run(args)
    except ValidationError as invalid:
        for error in invalid.errors():
            name = ".".join(str(part) for part in error["loc"])
            print(f"agentic-rag: setting {name}: {error['msg']}", file=sys.stderr)
        return 2
    return result


def mcp_main() -> int:
    """The `agentic-rag-mcp` console script that desktop MCP clients start."""
    return main(["mcp", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
