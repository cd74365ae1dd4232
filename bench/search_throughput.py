"""hybrid_retrieve over MCP under concurrency, against its floor, in one run (issue 18, point 10).

    .venv/bin/python bench/search_throughput.py                 # ~6 minutes (KB cached)
    .venv/bin/python bench/search_throughput.py --quick         # ~2 minutes (KB cached)
    .venv/bin/python bench/search_throughput.py --before REV    # also REV's server, beside

The knowledge base: 1,700 Debian man pages (bench/knowledge_corpus.py, rendered by `man -l`),
chunked by the product's chunker and written by `KnowledgeStore.write_document` into an
embedded PostgreSQL, tenant `local` (what a server without credentials serves). Built once and
cached in bench/.work/search-kb/ (a copy is served, so the runs never grow the cached one).
Vectors: each page's is the real model's embedding of its first chunk's opening words, each
chunk's that vector plus Gaussian noise (cosine about 0.8 to it): the model's space, clustered by
page as real chunks are, without embedding 26,000 chunks (an hour of these loaded cores). The
tenant (~26,000 chunks) is above the exact-search threshold: the dense leg reads the HNSW index.

End to end: `agentic-rag serve --workers 1` (the work tree's code, copied when the run starts;
with `--before REV`, also REV's, on the same database) driven by wrk through
bench/lua/mcp_call.lua: `tools/call` of `hybrid_retrieve` with `{"query": ...}` (its defaults:
top 5, an extractive answer), stateless Streamable HTTP as a 2026-07-28 client sends it
(Accept JSON and SSE), at 1, 4 and 8 connections; every answer is checked.

The floor, in this process on the same database: the query's embedding (`LocalEmbedder`, the
server's model and threads) then the dense leg, beside the lexical leg (`KnowledgeStore.dense`
and `.lexical`, 100 candidates each, as `hybrid_retrieve` asks), by as many concurrent asyncio
workers, each query alone (no batching across queries).

For each concurrency, the subjects run in turn (order rotating by round), each a warm-up then a
measurement; the table gives medians over rounds. Besides rates and latencies, the CPU each
spent per query: the server's process (not its PostgreSQL) and the floor's process, the figures
that a loaded machine disturbs least. Results: bench/results/NAME.{json,md} (default
`search-throughput`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile import PY_SPY, _rows, ensure_py_spy, summarize

import knowledge_corpus as corpus
from loadgen import percentile, run_wrk
from procs import Server, free_port
from send_cpu import export_revision

from agentic_rag.embedding.embedders import DIMENSION, MODEL_NAME, LocalEmbedder
from agentic_rag.knowledge.chunking import Chunker
from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.retrieval import RetrievalConfig
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import EXACT_SEARCH_MAX_CHUNKS, Filters
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.postgres import connect

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
RESULTS = BENCH / "results"
LUA = BENCH / "lua" / "mcp_call.lua"
PYTHON = ROOT / ".venv" / "bin" / "python"
TENANT = "local"  # the principal of a server without credentials
TOOL = "hybrid_retrieve"
WIDTH = RetrievalConfig().candidates
QUERIES = 400


# -- the knowledge base -------------------------------------------------------------------------


def _unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def _write(data_dir: Path, pages: list[corpus.Page]) -> dict[str, Any]:
    embedder = LocalEmbedder()  # its tokenizer, for the chunker; no inference
    chunker = Chunker(embedder.count_tokens, embedder.max_tokens, 32)
    server = EmbeddedPostgres(data_dir)
    rng = np.random.default_rng(18)
    started = time.monotonic()
    chunks_written = 0
    try:
        pool = await connect(server.start(), size=2)
        try:
            store = KnowledgeStore(pool)
            space = await store.open_space(MODEL_NAME, DIMENSION)
            for page in pages:
                sections = markdown_sections(page.markdown)
                chunks = chunker.chunk(sections)
                if not chunks:
                    continue
                document = ExtractedDocument(
                    uri=page.name, title=page.name, mime_type="text/markdown", sections=sections
                )
                result = await store.write_document(
                    TENANT,
                    await store.upsert_source(TENANT, "text", page.name, page.name, {}),
                    document,
                    chunks,
                    _unit_rows(rng, len(chunks)),
                    space,
                    document_vector=_unit_rows(rng, 1)[0],
                )
                chunks_written += result.chunks
            await pool.execute("VACUUM ANALYZE")
        finally:
            await pool.close()
    finally:
        server.stop()
    return {
        "pages": len(pages),
        "chunks": chunks_written,
        "build_s": round(time.monotonic() - started, 1),
        "built": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


OPENING_WORDS = 24
CHUNK_COSINE = 0.8  # a chunk's vector's cosine to its page's, about


async def _embed_openings(data_dir: Path) -> dict[str, Any]:
    """Vectors in the real model's space, at a small share of the embedding time: each page's
    vector is the real embedding of its first chunk's opening words, and each of its chunks'
    is that vector plus Gaussian noise (cosine about 0.8 to it), so that the HNSW graph holds
    clusters of pages, as with real chunks, rather than uniform noise. The index is dropped
    while the vectors change and built again after."""
    embedder = LocalEmbedder()
    server = EmbeddedPostgres(data_dir)
    rng = np.random.default_rng(10)
    started = time.monotonic()
    try:
        pool = await connect(server.start(), size=2)
        try:
            rows = await pool.fetch(
                "SELECT id, document_id, text FROM chunks WHERE tenant = $1 "
                "ORDER BY document_id, position",
                TENANT,
            )
            firsts: dict[str, str] = {}
            for row in rows:
                firsts.setdefault(row["document_id"], row["text"])
            documents = list(firsts)
            openings = [" ".join(firsts[d].split()[:OPENING_WORDS]) for d in documents]
            centres = dict(zip(documents, await embedder.embed(openings), strict=True))
            spread = np.sqrt((1 / CHUNK_COSINE**2 - 1) / DIMENSION)
            vectors = np.stack([centres[r["document_id"]] for r in rows])
            vectors = vectors + rng.normal(0, spread, vectors.shape).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            async with pool.acquire() as conn, conn.transaction():
                indexes = await conn.fetch(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = "
                    "'chunk_embeddings' AND indexname LIKE 'chunk_embeddings_hnsw_%'"
                )
                for index in indexes:
                    await conn.execute(f"DROP INDEX {index['indexname']}")
                await conn.execute(
                    "UPDATE chunk_embeddings e SET embedding = v.embedding::vector "
                    "FROM unnest($1::bigint[], $2::text[]) AS v(chunk_id, embedding) "
                    "WHERE e.chunk_id = v.chunk_id AND e.tenant = $3",
                    [r["id"] for r in rows],
                    [_vector_text(v) for v in vectors],
                    TENANT,
                )
                await conn.execute(
                    "UPDATE document_embeddings e SET embedding = v.embedding::vector "
                    "FROM unnest($1::text[], $2::text[]) AS v(document_id, embedding) "
                    "WHERE e.document_id = v.document_id AND e.tenant = $3",
                    documents,
                    [_vector_text(centres[d]) for d in documents],
                    TENANT,
                )
                for index in indexes:
                    await conn.execute(index["indexdef"])
            await pool.execute("VACUUM ANALYZE")
        finally:
            await pool.close()
    finally:
        server.stop()
        await embedder.aclose()
    return {
        "vectors": f"pages: their opening {OPENING_WORDS} words embedded; chunks: their "
        f"page's plus noise (cosine about {CHUNK_COSINE})",
        "vectors_s": round(time.monotonic() - started, 1),
    }


def _vector_text(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


async def knowledge_base(page_count: int) -> tuple[Path, dict[str, Any], list[str]]:
    """The cached knowledge base of `page_count` pages (built if missing), its description, and
    the queries (NAME lines of its pages)."""
    pages = corpus.pages(page_count)
    queries = corpus.queries(pages, QUERIES)
    cached = WORK / "search-kb" / f"pages-{page_count}"
    marker = cached / "kb.json"
    if not marker.exists():
        shutil.rmtree(cached, ignore_errors=True)
        print(f"building the knowledge base of {len(pages)} pages in {cached}", flush=True)
        described = await _write(cached, pages)
        marker.write_text(orjson.dumps(described).decode())
    described = orjson.loads(marker.read_text())
    if "vectors" not in described:
        print("embedding the chunks' opening words", flush=True)
        described |= await _embed_openings(cached)
        marker.write_text(orjson.dumps(described).decode())
    return cached, described, queries


def snapshot_src() -> Path:
    """The work tree's `src/` as it is now (its own copy: send_cpu.py may run meanwhile), so
    that edits made while the benchmark runs do not reach it."""
    tree = WORK / "search-tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


# -- the servers --------------------------------------------------------------------------------


def call_body(query: str) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"query": query}},
        }
    )


class McpServer(Server):
    """`agentic-rag serve`, ready when a `hybrid_retrieve` call answers with hits."""

    def _wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting; see {self.log_path}")
            try:
                status, body = _post_mcp(self.port, call_body("copy files and directories"))
            except OSError as exc:
                last = str(exc)
                time.sleep(0.3)
                continue
            if status == 200 and b'"trajectory_id"' in body and b'"isError":true' not in body:
                return
            last = f"HTTP {status}: {body[:300]!r}"
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready in time ({last}); see {self.log_path}")


def _post_mcp(port: int, body: bytes) -> tuple[int, bytes]:
    """POST /mcp as a handshake-era client would (JSON answer), on a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    return (int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0), payload


def serve(name: str, tree: Path, data_dir: Path) -> McpServer:
    """`agentic-rag serve --workers 1` of the code in `tree` (PYTHONPATH before the editable
    install), on `data_dir`'s embedded PostgreSQL."""
    port = free_port()
    command = [
        str(PYTHON), "-c", "import sys; from agentic_rag.cli import main; sys.exit(main())",
        "serve", "--port", str(port), "--data-dir", str(data_dir), "--workers", "1",
        "--log-level", "warning",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tree / "src")}
    server = McpServer(
        name=name, command=command, port=port, log_path=WORK / "logs" / f"search-{name}.log",
        cwd=ROOT, env=env,
    )  # fmt: skip
    server.postgres_dir = (data_dir / "postgres").resolve()
    return server


def measure_server(server: Server, queries_file: Path, clients: int, seconds: float) -> dict:
    before = server.cpu_snapshot()
    result = run_wrk(
        server, clients, seconds, path="/mcp", script=LUA, script_args=[TOOL, str(queries_file)]
    )
    after = server.cpu_snapshot()
    own = server.server_pids()
    used = {pid: t - before.per_pid.get(pid, 0.0) for pid, t in after.per_pid.items()}
    answers = max(result.requests, 1)
    return {
        "qps": result.rps,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "requests": result.requests,
        "errors": result.error_count,
        "bad_sample": result.bad_sample,
        "cpu_ms_per_query": 1000 * sum(v for p, v in used.items() if p in own) / answers,
        "postgres_cpu_ms_per_query": 1000
        * sum(v for p, v in used.items() if p not in own)
        / answers,
        "other_cpu_pct": result.other_cpu_pct,
    }


# -- the floor ----------------------------------------------------------------------------------


class Floor:
    """The query embedding and the two SQL legs, nothing else, in this process."""

    def __init__(self, store: KnowledgeStore, embedder: LocalEmbedder, space: Any) -> None:
        self.store, self.embedder, self.space = store, embedder, space

    async def one(self, query: str) -> None:
        async def dense() -> Any:
            (vector,) = await self.embedder.embed([query])
            return await self.store.dense(TENANT, self.space, vector, WIDTH, Filters())

        found, _ = await asyncio.gather(
            dense(), self.store.lexical(TENANT, query, WIDTH, Filters())
        )
        assert found, f"the dense leg found nothing for {query!r}"

    async def run(self, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
        latencies: list[float] = []
        stop = time.monotonic() + seconds
        cpu_before, started = time.process_time(), time.monotonic()

        async def worker(offset: int) -> None:
            index = offset * 7919
            while time.monotonic() < stop:
                index += 1
                began = time.perf_counter()
                await self.one(queries[index % len(queries)])
                latencies.append(time.perf_counter() - began)

        await asyncio.gather(*(worker(i) for i in range(clients)))
        wall = time.monotonic() - started
        answers = max(len(latencies), 1)
        return {
            "qps": len(latencies) / wall,
            "p50_ms": 1000 * percentile(latencies, 50),
            "p99_ms": 1000 * percentile(latencies, 99),
            "requests": len(latencies),
            "errors": 0,
            "cpu_ms_per_query": 1000 * (time.process_time() - cpu_before) / answers,
        }


def record_profile(server: Server, queries_file: Path, seconds: int, output: str) -> None:
    """py-spy (250 Hz, all threads) on the server while 8 clients call, into
    bench/results/OUTPUT-profile.md; the stacks stay in bench/.work/."""
    ensure_py_spy()
    collapsed = WORK / f"{output}-profile.txt"
    loaded: list[dict[str, Any]] = []
    load = threading.Thread(
        target=lambda: loaded.append(measure_server(server, queries_file, 8, seconds + 2))
    )
    load.start()
    time.sleep(1)
    subprocess.run(
        [str(PY_SPY), "record", "--pid", str(server.server_pid), "--rate", "250", "--nonblocking",
         "--duration", str(seconds), "--format", "raw", "--output", str(collapsed)],
        check=True, capture_output=True,
    )  # fmt: skip
    load.join()
    profile = summarize(collapsed, 45)
    samples = max(profile.samples, 1)
    during = loaded[0]
    lines = [
        f"# py-spy profile: hybrid_retrieve over MCP, 8 clients, one worker ({server.name})",
        "",
        f"- {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}; {seconds} s at 250 Hz, "
        f"all threads; during it {during['qps']:.1f} q/s, server CPU "
        f"{during['cpu_ms_per_query']:.1f} ms/q, its PostgreSQL "
        f"{during['postgres_cpu_ms_per_query']:.1f} ms/q",
        f"- {profile.samples} busy samples; percentages are of those",
        "",
        "## Own samples by package (ours: by module)",
        "",
        "| % busy | samples | where |",
        "| ---: | ---: | --- |",
        *_rows(profile.own_by_area, samples),
        "",
        "## Top functions by inclusive samples",
        "",
        "| % busy | samples | function |",
        "| ---: | ---: | --- |",
        *_rows(profile.inclusive_by_function, samples),
        "",
        "## Top functions by own samples",
        "",
        "| % busy | samples | function |",
        "| ---: | ---: | --- |",
        *_rows(profile.own_by_function, samples),
        "",
    ]
    (RESULTS / f"{output}-profile.md").write_text("\n".join(lines))


# -- the run ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data_dir, described, queries = await knowledge_base(args.pages)
    if described["chunks"] > EXACT_SEARCH_MAX_CHUNKS:
        print("note: the tenant is above the exact-search threshold (HNSW path)", flush=True)
    served = WORK / "data" / "search-throughput"
    shutil.rmtree(served, ignore_errors=True)
    served.parent.mkdir(parents=True, exist_ok=True)
    # cp -a: the files keep their owner, the embedded server's system user. (Blocking is
    # fine here, as for wrk below: nothing else runs in this loop meanwhile.)
    subprocess.run(["cp", "-a", str(data_dir), str(served)], check=True)  # noqa: ASYNC221
    queries_file = WORK / "search-queries.txt"
    queries_file.write_text("".join(orjson.dumps(q).decode()[1:-1] + "\n" for q in queries))

    trees = {"after": snapshot_src()}
    if args.before:
        trees["before"] = export_revision(args.before)
    servers = {name: serve(name, tree, served) for name, tree in trees.items()}
    database = EmbeddedPostgres(served)
    rounds: list[dict[str, Any]] = []
    try:
        for server in servers.values():
            server.start()
            print(f"{server.name}: up in {server.startup_s:.1f} s", flush=True)
        pool = await connect(database.start(), size=args.pool)
        embedder = LocalEmbedder()
        await embedder.start()
        store = KnowledgeStore(pool)
        space = await store.active_space()
        floor = Floor(store, embedder, space)
        subjects = [*servers, "floor"]
        for round_ in range(args.rounds):
            order = subjects[round_ % len(subjects) :] + subjects[: round_ % len(subjects)]
            for clients in args.clients:
                for subject in order:
                    if subject == "floor":
                        await floor.run(queries, clients, args.warmup)
                        # The database's CPU, seen from a server's tree (that server idles).
                        idle = servers["after"]
                        before = idle.cpu_snapshot()
                        measured = await floor.run(queries, clients, args.seconds)
                        used = idle.cpu_snapshot().per_pid
                        own = idle.server_pids()
                        measured["postgres_cpu_ms_per_query"] = (
                            1000
                            * sum(
                                t - before.per_pid.get(p, 0.0)
                                for p, t in used.items()
                                if p not in own
                            )
                            / max(measured["requests"], 1)
                        )
                    else:
                        server = servers[subject]
                        measure_server(server, queries_file, clients, args.warmup)
                        measured = measure_server(server, queries_file, clients, args.seconds)
                    measured.update(round=round_, subject=subject, clients=clients)
                    rounds.append(measured)
                    print(
                        f"round {round_} c{clients} {subject}: {measured['qps']:.1f} q/s, "
                        f"p50 {measured['p50_ms']:.1f} ms, p99 {measured['p99_ms']:.1f} ms, "
                        f"CPU {measured['cpu_ms_per_query']:.1f} ms/q, "
                        f"errors {measured['errors']}",
                        flush=True,
                    )
        await pool.close()
        await embedder.aclose()
        if args.profile:
            record_profile(servers[args.profile_of], queries_file, args.profile, args.output)
    finally:
        database.stop()
        for server in servers.values():
            server.stop()
        shutil.rmtree(served, ignore_errors=True)
    return {
        "run": {
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "mode": "quick" if args.quick else "full",
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "seconds": args.seconds,
            "before": args.before,
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "knowledge_base": described,
        "queries": len(queries),
        "rounds": rounds,
        "summary": summarise(rounds, [*servers, "floor"], args.clients),
    }


def summarise(rounds: list[dict[str, Any]], subjects: list[str], clients: list[int]) -> list:
    rows = []
    for c in clients:
        floor_qps = statistics.median(
            r["qps"] for r in rounds if r["subject"] == "floor" and r["clients"] == c
        )
        for subject in subjects:
            mine = [r for r in rounds if r["subject"] == subject and r["clients"] == c]
            qps = statistics.median(r["qps"] for r in mine)
            rows.append(
                {
                    "clients": c,
                    "subject": subject,
                    "qps": round(qps, 1),
                    "p50_ms": round(statistics.median(r["p50_ms"] for r in mine), 2),
                    "p99_ms": round(statistics.median(r["p99_ms"] for r in mine), 2),
                    "cpu_ms_per_query": round(
                        statistics.median(r["cpu_ms_per_query"] for r in mine), 2
                    ),
                    "postgres_cpu_ms_per_query": round(
                        statistics.median(r["postgres_cpu_ms_per_query"] for r in mine), 2
                    ),
                    "errors": sum(r["errors"] for r in mine),
                    "ratio_to_floor": round(qps / floor_qps, 3),
                }
            )
    return rows


def render(result: dict[str, Any]) -> str:
    run_, kb = result["run"], result["knowledge_base"]
    lines = [
        "# hybrid_retrieve over MCP against its floor (issue 18, point 10)",
        "",
        f"`bench/search_throughput.py` ({run_['mode']}; bench/README.md says how). Run "
        f"{run_['at']}, {run_['cores']} cores, load average at the end "
        f"{', '.join(f'{x:.1f}' for x in run_['load_average'])}; {run_['rounds']} rounds of "
        f"{run_['seconds']} s per subject and concurrency (after {run_['warmup_s']} s of "
        "warm-up), medians.",
        "",
        f"Knowledge base: {kb['pages']} man pages, {kb['chunks']} chunks, tenant `local`, "
        f"vectors: {kb.get('vectors', 'synthetic')}; {result['queries']} queries (NAME lines). "
        "End to end: "
        '`tools/call hybrid_retrieve {"query": ...}` over stateless Streamable HTTP (wrk, '
        "SSE answers), `agentic-rag serve --workers 1`"
        + (
            f"; `before` is {run_['before']}'s server on the same database"
            if run_["before"]
            else ""
        )
        + ". Floor: the query embedding then the dense leg, beside the lexical leg, in one "
        "process, each query alone. *CPU ms/q*: the server's process (not PostgreSQL), or the "
        "floor's process, per answer; *PostgreSQL CPU ms/q*: the database's processes (which "
        "the floor's queries share with the idle servers' pools).",
        "",
        "| clients | subject | q/s | p50 ms | p99 ms | CPU ms/q | PostgreSQL CPU ms/q | errors "
        "| q/s / floor's |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["summary"]:
        lines.append(
            f"| {row['clients']} | {row['subject']} | {row['qps']:.1f} | {row['p50_ms']:.1f} | "
            f"{row['p99_ms']:.1f} | {row['cpu_ms_per_query']:.2f} | "
            f"{row['postgres_cpu_ms_per_query']:.2f} | {row['errors']} | "
            f"{row['ratio_to_floor']:.2f} |"
        )
    if run_["before"]:
        lines += [
            "",
            "| clients | after / before q/s | after / before CPU ms/q |",
            "| ---: | ---: | ---: |",
        ]
        by = {(r["clients"], r["subject"]): r for r in result["summary"]}
        for c in sorted({r["clients"] for r in result["summary"]}):
            a, b = by[(c, "after")], by[(c, "before")]
            lines.append(
                f"| {c} | {a['qps'] / b['qps']:.2f}x | "
                f"{a['cpu_ms_per_query'] / b['cpu_ms_per_query']:.2f}x |"
            )
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 4 s per measurement")
    parser.add_argument("--pages", type=int, default=1700)
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--before", help="also serve this revision's code, beside")
    parser.add_argument("--pool", type=int, default=10, help="the floor's connections")
    parser.add_argument("--output", default="search-throughput")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="SECONDS", help="then py-spy a server"
    )
    parser.add_argument("--profile-of", default="after", choices=("after", "before"))
    args = parser.parse_args()
    args.clients = args.clients or [1, 4, 8]
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (4.0 if args.quick else 8.0)
    args.warmup = 1.0 if args.quick else 2.0
    return args


def main() -> None:
    args = parse_args()
    result = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.json").write_bytes(
        orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n"
    )
    (RESULTS / f"{args.output}.md").write_text(render(result))
    print(render(result))


if __name__ == "__main__":
    main()
