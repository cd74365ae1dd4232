"""The command line: `agentic-rag serve | ingest | query | sources | reembed | skills | call |
peers | keys | mcp | doctor`, and `agentic-rag-mcp`.

What the user typed is checked by argparse (an option's value, with the rules of its setting)
and by `Settings` (the environment too), before anything starts; what fails prints one line
and exits non-zero, never a traceback.
"""

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import TypeAdapter, ValidationError
from pydantic_settings import SettingsError

from agentic_rag.config import Settings, env_name, setting_errors
from agentic_rag.embedding.errors import EmbeddingError
from agentic_rag.knowledge.errors import EmbeddingModelMismatch
from agentic_rag.security.api_keys import (
    ApiKeyStore,
    check_tenant,
    checked_groups,
    checked_scopes,
)
from agentic_rag.storage.embedded import EmbeddedPostgresError

if TYPE_CHECKING:
    from agentic_rag.cli.skill_client import Skills
    from agentic_rag.skills import SkillRegistry

DESCRIPTION = (
    "agentic-rag: a knowledge agent. One server is an A2A (v0.2.1) agent and an MCP server "
    "over the same skills, with its data in PostgreSQL (embedded in a data directory unless "
    "DATABASE_URL is set). Settings come from options and AGENTIC_RAG_* variables."
)
MCP_DESCRIPTION = (
    "agentic-rag-mcp: the agentic-rag skills as an MCP server over stdio, for clients that "
    "start their servers. Bridged to the server at AGENTIC_RAG_URL (with AGENTIC_RAG_API_KEY) "
    "when set, else the engine runs in this process on the data directory."
)
MAX_KEY_DAYS = 3650  # ten years: beyond that, a key that never expires says what is meant

SETTING_OPTIONS = ("host", "port", "data_dir", "public_url", "insecure", "log_level", "workers")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gives; the environment and defaults give the rest."""
    given = {name: getattr(args, name, None) for name in SETTING_OPTIONS}
    given["insecure"] = given["insecure"] or None  # an absent --insecure says nothing
    return {name: value for name, value in given.items() if value is not None}


# -- option types: a bad value is refused by argparse, with the reason -----------------------


def _setting(field: str) -> Callable[[str], Any]:
    """The type of an option that gives the setting `field`: checked by the setting's rules."""
    info = Settings.model_fields[field]
    form: Any = Annotated[info.annotation, info]  # the field's type with its constraints
    adapter: TypeAdapter[Any] = TypeAdapter(form)

    def check(text: str) -> Any:
        try:
            return adapter.validate_python(text)
        except ValidationError as invalid:
            raise argparse.ArgumentTypeError(setting_errors(invalid)[0][1]) from None

    return check


def _days(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_KEY_DAYS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of days from 1 to {MAX_KEY_DAYS}"
        )
    return int(text)


def _tenant(text: str) -> str:
    try:
        check_tenant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


def _groups(text: str) -> tuple[str, ...] | None:
    try:
        return checked_groups(g.strip() for g in text.split(",") if g.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _scopes(text: str) -> tuple[str, ...]:
    try:
        return checked_scopes(s.strip() for s in text.split(",") if s.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- commands ---------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from agentic_rag.serving import serve

    serve("agentic_rag.app:create_app", _overrides(args))
    return 0


async def _with_keys(settings: Settings, action: Callable[[ApiKeyStore], Awaitable[int]]) -> int:
    from agentic_rag.storage.database import open_database

    async with open_database(settings) as pool:
        return await action(ApiKeyStore(pool))


def _keys_create(args: argparse.Namespace) -> int:
    days = args.expires_in_days
    expires = datetime.now(UTC) + timedelta(days=days) if days is not None else None

    async def create(store: ApiKeyStore) -> int:
        key, record = await store.create(
            args.tenant, args.scopes, name=args.name, expires_at=expires, groups=args.groups
        )
        print(key)
        print(
            f"id {record.id}, tenant {record.tenant}, scopes {','.join(record.scopes)}"
            + (f", tool groups {','.join(record.groups)}" if record.groups else "")
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
            groups = ",".join(key.groups) if key.groups is not None else "all"
            print(
                f"{key.id}  {key.tenant:<16} {','.join(key.scopes):<16} expires {expiry:<10} "
                f"{state:<8} groups {groups:<16} {key.name}"
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
    from agentic_rag.mcp import stdio

    settings = Settings(**_overrides(args))
    url = stdio.bridge_url()
    if url is not None:
        return stdio.run_bridge(url)
    from agentic_rag.engine import Engine

    return stdio.run_local(Engine(settings, transport="stdio"))


def _doctor(args: argparse.Namespace) -> int:
    from agentic_rag import doctor

    return doctor.main(_overrides(args), as_json=args.json)


# -- the parsers ------------------------------------------------------------------------------


def _target(args: argparse.Namespace) -> str | Settings:
    """Where a command on the data runs: the server at --url; else the server that holds the
    data directory (and database), when one runs and the `local` tenant's data is asked for
    (another tenant's data is a server's only through that tenant's key), said on stderr;
    else this process, with these settings. On a server, the server's settings decide (its
    SSRF allow-lists, its models), as for every other client of it."""
    from agentic_rag.running import running_server

    if args.url:
        return str(args.url)
    settings = Settings(**_overrides(args))
    server = running_server(settings.data_dir, settings.database_url)
    if args.tenant != "local" or server is None:
        return settings
    action = getattr(args, "peers_command", None)
    command = f"{args.command} {action}" if action else args.command
    print(
        f"agentic-rag {command}: asking the server at {server.url} (pid {server.pid}), which "
        f"holds {settings.data_dir}",
        file=sys.stderr,
    )
    return server.url


async def _open_skills(args: argparse.Namespace) -> "Skills":
    """The skills where the command runs (`_target`)."""
    from agentic_rag.cli.skill_client import LocalSkills, RemoteSkills

    target = _target(args)
    if isinstance(target, str):
        return RemoteSkills(target, args.api_key)
    if args.command == "query":
        print(
            "agentic-rag query: loading the models in this process (seconds; a running "
            "`agentic-rag serve` on this data directory would answer at once)",
            file=sys.stderr,
        )
    from agentic_rag.engine import Engine

    return await LocalSkills(Engine(target, transport="stdio"), args.tenant).start()


def _knowledge(args: argparse.Namespace) -> int:
    """`ingest`, `query` and `sources`: where `_target` says."""
    from agentic_rag.cli import knowledge as commands

    async def run() -> int:
        skills = await _open_skills(args)
        try:
            if args.command == "ingest":
                return await commands.ingest(
                    skills, args.targets, depth=args.depth, max_pages=args.max_pages
                )
            if args.command == "query":
                return await commands.query(
                    skills, args.question, top_k=args.top_k, reranker=args.reranker
                )
            return await commands.sources(skills, args.source_id)
        finally:
            await skills.aclose()

    return asyncio.run(run())


def _product_registry(args: argparse.Namespace) -> "SkillRegistry":
    """The skills the product serves: those of the engine `serve` runs (not started here)."""
    from agentic_rag.engine import Engine

    return Engine(Settings(**_overrides(args))).registry


def _skills(args: argparse.Namespace) -> int:
    from agentic_rag.cli.skill_commands import describe_skills

    return describe_skills(_product_registry(args))


def _call(args: argparse.Namespace) -> int:
    """`call SKILL [ARGUMENTS]`: checked against the skill's input model before anything
    starts, then run where `_target` says."""
    from agentic_rag.cli import skill_commands

    try:
        arguments = skill_commands.parse_arguments(args.arguments, sys.stdin)
        skill, arguments = skill_commands.checked_call(
            _product_registry(args), args.skill, arguments
        )
    except skill_commands.ArgumentsRefused as refused:
        print(f"agentic-rag call: {refused}", file=sys.stderr)
        return 2

    async def run() -> int:
        skills = await _open_skills(args)
        try:
            return await skill_commands.call(skills, skill, arguments, as_json=args.json)
        finally:
            await skills.aclose()

    return asyncio.run(run())


def _peers(args: argparse.Namespace) -> int:
    """`peers add | list | remove`: where `_target` says."""
    from agentic_rag.cli import peers as commands

    async def run() -> int:
        target = _target(args)
        peers: commands.Peers
        if isinstance(target, str):
            peers = commands.RemotePeers(target, args.api_key)
        else:
            peers = await commands.LocalPeers(target, args.tenant).start()
        try:
            return await commands.run(peers, args.peers_command, getattr(args, "target", None))
        finally:
            await peers.aclose()

    return asyncio.run(run())


def _reembed(args: argparse.Namespace) -> int:
    from agentic_rag.cli.knowledge import reembed

    return asyncio.run(reembed(Settings(**_overrides(args))))


def _add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('agentic-rag')}")


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="where the embedded PostgreSQL keeps its data (default AGENTIC_RAG_DATA_DIR, "
        "else ./data); unused when DATABASE_URL is set",
    )


def _add_target_options(command: argparse.ArgumentParser) -> None:
    """Where a command's skills run: --url, the server holding the data directory, or the
    local data directory (as --tenant) in this process (`_target`)."""
    _add_data_dir(command)
    command.add_argument(
        "--url",
        default=os.environ.get("AGENTIC_RAG_URL"),
        help="a running server to use (default AGENTIC_RAG_URL; without one, the server that "
        "holds the data directory if one runs, else this process on the local data)",
    )
    command.add_argument(
        "--api-key",
        default=os.environ.get("AGENTIC_RAG_API_KEY"),
        help="the API key for --url (default AGENTIC_RAG_API_KEY)",
    )
    command.add_argument(
        "--tenant",
        type=_tenant,
        default="local",
        help="the tenant whose local data this process uses (default local, which a server "
        "holding the data directory serves instead when one runs)",
    )


def _add_mcp_options(parser: argparse.ArgumentParser) -> None:
    _add_data_dir(parser)
    # stdout is the protocol: logs go to stderr, and only warnings unless asked.
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="least severe level logged to stderr (default warning)",
    )
    parser.set_defaults(run=_mcp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentic-rag", description=DESCRIPTION)
    _add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the server: A2A at /, the Agent Card, MCP at /mcp"
    )
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_setting("port"), help="port to bind (default 8000)")
    _add_data_dir(serve)
    serve.add_argument(
        "--public-url", help="the URL peers use to reach this server (the Agent Card's url)"
    )
    serve.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error", "critical"],
        help="least severe level logged (default AGENTIC_RAG_LOG_LEVEL, else info)",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without credentials"
    )
    serve.add_argument(
        "--workers",
        type=_setting("workers"),
        help="processes sharing the port and the database (default AGENTIC_RAG_WORKERS, else 1)",
    )
    serve.set_defaults(run=_serve)

    keys = commands.add_parser(
        "keys", help="create, list and revoke API keys", description="Manage API keys."
    ).add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True, type=_tenant, help="the tenant the key acts for")
    create.add_argument(
        "--scopes",
        type=_scopes,
        default=("read", "write"),
        help="comma-separated: read, write, admin (default read,write)",
    )
    create.add_argument(
        "--groups",
        type=_groups,
        help="comma-separated groups of tools the key sees and may call over MCP: knowledge, "
        "ingest, graph, network, admin, graphiti-compat, upstream (default: every group the "
        "server offers; docs/skills.md)",
    )
    create.add_argument("--name", default="", help="a note to recognise the key by")
    create.add_argument(
        "--expires-in-days",
        type=_days,
        help=f"days until the key expires, 1 to {MAX_KEY_DAYS} (default: it never expires)",
    )
    create.set_defaults(run=_keys_create)
    listing = keys.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--tenant", type=_tenant, help="only the keys of this tenant")
    listing.set_defaults(run=_keys_list)
    revoke = keys.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", help="the key's id, as `keys list` shows it")
    revoke.set_defaults(run=_keys_revoke)
    for command in (create, listing, revoke):
        _add_data_dir(command)
        command.set_defaults(log_level="warning")  # the database's start-up is not news here

    mcp = commands.add_parser(
        "mcp",
        help="serve MCP over stdio (bridged to AGENTIC_RAG_URL when set, else in-process)",
        description=MCP_DESCRIPTION.removeprefix("agentic-rag-mcp: "),
    )
    _add_mcp_options(mcp)

    ingest = commands.add_parser(
        "ingest",
        help="ingest web pages, PDFs, text files and YouTube transcripts, with progress",
        description="Ingest each TARGET: an http(s) URL (crawled from there), a YouTube URL, "
        "a PDF, or a text or markdown file.",
    )
    ingest.add_argument("targets", nargs="+", metavar="TARGET", help="a URL or a file")
    ingest.add_argument(
        "--depth", type=int, default=1, help="link hops to follow from a URL (default 1)"
    )
    ingest.add_argument(
        "--max-pages", type=int, default=50, help="pages to fetch at most per URL (default 50)"
    )
    query = commands.add_parser(
        "query", help="ask the knowledge base; prints the answer and its numbered sources"
    )
    query.add_argument("question", help="the question, in quotes")
    query.add_argument("--top-k", type=int, default=5, help="sources to cite (default 5)")
    query.add_argument(
        "--reranker",
        choices=["rrf", "mmr", "cross-encoder", "llm"],
        help="rerank the fused hits (default: none)",
    )
    sources = commands.add_parser(
        "sources",
        help="list what the knowledge base holds; with SOURCE_ID, that source's documents",
    )
    sources.add_argument(
        "source_id",
        nargs="?",
        metavar="SOURCE_ID",
        help="list this source's documents (ids, titles, URIs) instead of the sources",
    )
    for command in (ingest, query, sources):
        _add_target_options(command)
        command.set_defaults(run=_knowledge, log_level="warning")
    _add_skill_commands(commands)
    reembed = commands.add_parser(
        "reembed",
        help="re-embed every chunk with the configured embedding model, then switch to it",
        description="Embeds every chunk with the model the settings configure "
        "(AGENTIC_RAG_EMBEDDING_*), resumably, while servers keep searching the old vectors; "
        "then switches searches to the new ones. Run it after changing the embedding model.",
    )
    _add_data_dir(reembed)
    reembed.set_defaults(run=_reembed, log_level="warning")

    doctor = commands.add_parser(
        "doctor", help="check the configuration, database, models and port; say what to fix"
    )
    doctor.add_argument("--host", help="the address serve would bind")
    doctor.add_argument("--port", type=_setting("port"), help="the port serve would bind")
    _add_data_dir(doctor)
    doctor.add_argument("--insecure", action="store_true", help="as serve --insecure")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(run=_doctor, log_level="warning")  # logs go to stderr
    return parser


def _add_skill_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`skills`, `call` and `peers`."""
    skills = commands.add_parser(
        "skills",
        help="list the skills (A2A skills and MCP tools) with what each does",
        description="The skills this agent serves, as its Agent Card and `help` list them; "
        "`agentic-rag call SKILL` runs one.",
    )
    skills.set_defaults(run=_skills, log_level="warning")

    call = commands.add_parser(
        "call",
        help="run any skill with arguments and print its result, with progress",
        description='Run SKILL with ARGUMENTS: one JSON object (\'{"query": "..."}\'), - to '
        "read one from standard input, or pairs key=value (a string, read as the field's "
        "type) and key:=JSON (any JSON value). The arguments are checked against the skill's "
        "input schema first (`agentic-rag call help topic=SKILL` shows it).",
    )
    call.add_argument("skill", metavar="SKILL", help="the skill's name, as `skills` lists it")
    call.add_argument(
        "arguments",
        nargs="*",
        metavar="ARGUMENT",
        help="a JSON object, -, or key=value and key:=JSON pairs",
    )
    call.add_argument(
        "--json", action="store_true", help="print the structured result as JSON, not as text"
    )
    _add_target_options(call)
    call.set_defaults(run=_call, log_level="warning")

    peers = commands.add_parser(
        "peers",
        help="register, list and remove peer agents (the agent network)",
        description="The peer agents this agent delegates to, per tenant (docs/network.md).",
    ).add_subparsers(dest="peers_command", required=True, metavar="ACTION")
    add = peers.add_parser(
        "add",
        help="register the agent whose Agent Card is at CARD_URL (or its base URL)",
        description="Fetch the Agent Card at CARD_URL (a card's URL, or the agent's base URL), "
        "check it, and register the agent; registering it again updates it. Peers on private "
        "addresses need AGENTIC_RAG_PEERS_ALLOW_PRIVATE (the server's, with --url).",
    )
    add.add_argument("target", metavar="CARD_URL", help="the Agent Card's URL, or the agent's")
    listing = peers.add_parser("list", help="list the peers, with their health and skills")
    remove = peers.add_parser("remove", help="remove a peer by id")
    remove.add_argument("target", metavar="ID", help="the peer's id, as `peers list` shows it")
    for command in (add, listing, remove):
        _add_target_options(command)
        command.set_defaults(run=_peers, log_level="warning")


def build_mcp_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentic-rag-mcp", description=MCP_DESCRIPTION)
    _add_version(parser)
    _add_mcp_options(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=(getattr(args, "log_level", None) or "info").upper())
    try:
        result: int = args.run(args)
    except ValidationError as invalid:
        for field, message in setting_errors(invalid):
            where = f"setting {field} ({env_name(field)})" if field else "settings"
            print(f"agentic-rag: {where}: {message}", file=sys.stderr)
        return 2
    except SettingsError as invalid:  # a setting pydantic-settings itself could not read
        print(f"agentic-rag: settings: {invalid}", file=sys.stderr)
        return 2
    except EmbeddedPostgresError as failed:
        print(f"agentic-rag: {failed}", file=sys.stderr)
        return 1
    except (EmbeddingModelMismatch, EmbeddingError) as refused:
        print(f"agentic-rag: {refused}", file=sys.stderr)
        return 2
    return result


def main(argv: list[str] | None = None) -> int:
    return _run(build_parser().parse_args(argv))


def mcp_main(argv: list[str] | None = None) -> int:
    """The `agentic-rag-mcp` console script that desktop MCP clients start."""
    return _run(build_mcp_parser().parse_args(argv))
