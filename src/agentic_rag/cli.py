"""The command line: `agentic-rag serve` and friends."""

import argparse
import logging
import sys
from pathlib import Path

from agentic_rag.config import Settings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from agentic_rag.app import build_app

    overrides = {
        k: v
        for k, v in {
            "host": args.host,
            "port": args.port,
            "data_dir": args.data_dir,
            "public_url": args.public_url,
        }.items()
        if v is not None
    }
    settings = Settings(**overrides)
    app = build_app(settings)
    base = f"http://{settings.host}:{settings.port}"
    print(f"agentic-rag: A2A JSON-RPC at {base}/", flush=True)
    print(f"agentic-rag: Agent Card at {base}/.well-known/agent.json", flush=True)
    print(
        f"agentic-rag: data in {settings.data_dir.resolve()}"
        if settings.database_url is None
        else "agentic-rag: database from DATABASE_URL",
        flush=True,
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentic-rag", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the A2A server")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8000)")
    serve.add_argument("--data-dir", type=Path, help="where embedded data lives (default ./data)")
    serve.add_argument("--public-url", help="the URL peers use to reach this server")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(run=_serve)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper() if hasattr(args, "log_level") else "INFO")
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
