"""Replicas under load while one is killed (issue 19, point 14): throughput, p99, takeover time.

    .venv/bin/python bench/cluster.py                    # 2, 3, 2 replicas, 20 s phases (~10 min)
    .venv/bin/python bench/cluster.py --replicas 2 --seconds 10

The cluster, on this machine: one PostgreSQL that no replica owns (the project's binaries, as
`tests/support/cluster.py` runs it), holding a copy of the search benchmark's knowledge base
(bench/search_throughput.py: 1,700 man pages, ~26,000 chunks, tenant `local`); one redis-server
with the FalkorDB module (each replica's REDIS_URL and AGENTIC_RAG_GRAPH_URL); N replicas of
`agentic-rag serve --workers 1`, each a process with its own data directory and port, sharing
DATABASE_URL, at the operator's defaults (sweep every 10 s, lease 30 s). The code is a revision's
`src/` (`--revision`, default HEAD, exported with `git archive`), so edits made to the work tree
while the benchmark runs do not reach it.

The load, on every replica at once, each from a wrk of its own: `hybrid_retrieve` over MCP
(bench/lua/mcp_call.lua, stateless Streamable HTTP) and durable `message/send` (bench/lua/
send.lua: a blocking send of a text message, which runs the default skill, `hybrid_retrieve`, as
a task stored in PostgreSQL before the answer). Three phases of `--seconds` each:

- **before**: all replicas up;
- **during**: replica 1 is killed (`kill -9`) 2 s into the phase and started again at once
  (it is back when its model is loaded and it answers); its clients' requests in flight fail
  (counted as errors), and their connections are refused until it is back (wrk connects
  again and again; a refused connection is no request, and is not counted);
- **after**: all replicas up again.

Between *before* and *during*, a crawl (`ingest_url` of a slow site this process serves) is
sent to replica 1, and the kill waits until it has stored a page. The **time to takeover** is
from the kill to the moment another replica's worker owns the crawl's task (tasks.worker, polled
every 0.1 s), and the **time to resume** to the first page stored after that; the crawl is then
canceled so that it weighs on no phase. A replica started again takes over, at its start, the
tasks of workers that hold no lease; a live replica spares a worker it saw alive for the lease
(30 s) before it takes its tasks over. So the smallest cluster runs once more with the killed
replica started `--late-restart` seconds (45) after the kill: there a live replica takes the
crawl over. Results: bench/results/NAME.{json,md} (default `cluster`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import psutil  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import WrkResult, machine_busy, run_wrk
from procs import Server, _post, free_port
from run import ensure_wrk, log
from search_throughput import LUA, TOOL, knowledge_base
from send_cpu import export_revision

from agentic_rag.graph.embedded import binaries
from agentic_rag.storage.embedded import EmbeddedPostgres

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work" / "cluster"
RESULTS = BENCH / "results"
PYTHON = ROOT / ".venv" / "bin" / "python"
PAGES = 1700  # the search benchmark's knowledge base
SITE_PAGES, SITE_DELAY_S = 120, 0.5  # the crawl outlives the takeover (lease 30 s + a sweep)
MCP_CLIENTS, SEND_CLIENTS = 2, 2  # wrk connections per replica and workload
FAULT_AFTER_S = 2.0  # into the *during* phase, the kill


# -- the servers --------------------------------------------------------------------------------


class Falkor:
    """redis-server with the FalkorDB module on a port of 127.0.0.1, in `directory`."""

    def __init__(self, directory: Path) -> None:
        server, module = binaries()
        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(server), "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                str(directory), "--save", "", "--appendonly", "no", "--loadmodule", str(module),
                "--logfile", str(directory / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not _listens(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"FalkorDB did not start; see {directory / 'redis.log'}")
            time.sleep(0.1)
        self.url = f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def _listens(port: int) -> bool:
    try:
        _post(port, b"", 1)
    except ConnectionRefusedError:
        return False
    except OSError:
        return True  # something answered (Redis does not speak HTTP)
    return True


def replica(index: int, tree: Path, environment: dict[str, str]) -> Server:
    """Replica `index`: `agentic-rag serve --workers 1` of `tree`'s code, its own data dir."""
    port = free_port()
    data_dir = WORK / f"replica-{index}"
    command = [
        str(PYTHON), "-c", "import sys; from agentic_rag.cli import main; sys.exit(main())",
        "serve", "--port", str(port), "--data-dir", str(data_dir), "--workers", "1",
        "--log-level", "warning",
    ]  # fmt: skip
    env = {**environment, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tree / "src")}
    return Server(
        name=f"replica-{index}", command=command, port=port,
        log_path=WORK / "logs" / f"replica-{index}.log", cwd=ROOT, env=env,
    )  # fmt: skip


# -- the slow site the crawl reads -------------------------------------------------------------


def serve_site(token: str) -> tuple[ThreadingHTTPServer, str]:
    """SITE_PAGES pages, each after SITE_DELAY_S; the index /0 links to all the others."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.strip("/")
            if not path.isdigit() or int(path) >= SITE_PAGES:
                self.send_error(404)
                return
            number = int(path)
            time.sleep(SITE_DELAY_S)
            links = "".join(f'<a href="/{n}">{n}</a> ' for n in range(1, SITE_PAGES))
            body = (
                f"<html><head><title>Lighthouse {number}</title></head><body><main>"
                f"<h1>Lighthouse {number}</h1><p>Page {number} of coast {token} tells of "
                f"lighthouse {number}, built in {1800 + number}, seen {number + 5} nautical "
                f"miles away.</p>{links if number == 0 else ''}</main></body></html>"
            ).encode()
            with contextlib.suppress(ConnectionError):  # a crawler killed or canceled mid-page
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def send_skill(server: Server, skill: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "kind": "message",
                    "messageId": uuid.uuid4().hex,
                    "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
                },
                "configuration": {"blocking": False},
            },
        }
    )
    status, answer = _post(server.port, body, 30)
    assert status == 200, answer[:300]
    result: dict[str, Any] = orjson.loads(answer)["result"]
    return result


def workers_of(replicas: list[Server], dsn: str) -> dict[int, str]:
    """Each replica's worker id: that of a blocking `help` task it ran."""
    task_ids = {}
    for server in replicas:
        answer = rpc(server, "message/send", {
            "message": {
                "role": "user", "kind": "message", "messageId": uuid.uuid4().hex,
                "parts": [{"kind": "data", "data": {"skill": "help", "arguments": {}}}],
            },
            "configuration": {"blocking": True},
        })  # fmt: skip
        task_ids[answer["result"]["id"]] = server.name

    async def fetch() -> dict[int, str]:
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch("SELECT id, worker FROM tasks WHERE id = ANY($1)", [*task_ids])
        finally:
            await conn.close()
        return {row["worker"]: task_ids[row["id"]] for row in rows}

    return asyncio.run(fetch())


def rpc(server: Server, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    _, answer = _post(server.port, body, 30)
    parsed: dict[str, Any] = orjson.loads(answer)
    return parsed


# -- the measurement ----------------------------------------------------------------------------


def phase(
    replicas: list[Server],
    queries: Path,
    seconds: float,
    cpu: ClusterCpu,
    fault: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Both workloads on every replica at once for `seconds`, `fault` done FAULT_AFTER_S into
    it: per replica and workload."""
    results: dict[str, dict[str, Any]] = {}

    def mcp(server: Server) -> None:
        measure(f"{server.name} mcp", lambda: run_wrk(
            server, MCP_CLIENTS, seconds, path="/mcp", script=LUA,
            script_args=[TOOL, str(queries)], timeout_s=10,
        ))  # fmt: skip

    def send(server: Server) -> None:
        measure(f"{server.name} send", lambda: run_wrk(server, SEND_CLIENTS, seconds, timeout_s=10))

    def measure(name: str, load: Callable[[], WrkResult]) -> None:
        try:
            results[name] = load().as_dict()
        except RuntimeError as exc:  # wrk ends at once when it cannot connect: the killed one
            results[name] = {"down": str(exc)}

    threads = [
        threading.Thread(target=work, args=(server,)) for server in replicas for work in (mcp, send)
    ]
    before = cpu.snapshot(replicas)
    for thread in threads:
        thread.start()
    if fault is not None:
        time.sleep(FAULT_AFTER_S)
        fault()
    for thread in threads:
        thread.join()
    return {"per_replica": results, **_totals(results), "cpu": cpu.since(before, replicas)}


class ClusterCpu:
    """CPU of the cluster's processes (the replicas, PostgreSQL and FalkorDB) and of the whole
    machine, over a phase, in % of one core."""

    def __init__(self, postgres_dir: Path, falkor: Falkor) -> None:
        self.postgres_dir, self.falkor = postgres_dir, falkor

    def _processes(self, replicas: list[Server]) -> list[psutil.Process]:
        found = [proc for server in replicas for proc in server.refresh_tree()]
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            pid = int((self.postgres_dir / "postmaster.pid").read_text().split("\n", 1)[0])
            postmaster = psutil.Process(pid)
            found += [postmaster, *postmaster.children(recursive=True)]
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(self.falkor.process.pid))
        return found

    def snapshot(self, replicas: list[Server]) -> tuple[float, float, dict[int, float]]:
        used: dict[int, float] = {}
        for proc in self._processes(replicas):
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                used[proc.pid] = times.user + times.system
        return time.monotonic(), machine_busy(), used

    def since(
        self, before: tuple[float, float, dict[int, float]], replicas: list[Server]
    ) -> dict[str, float]:
        wall, busy, used = self.snapshot(replicas)
        seconds = max(wall - before[0], 1e-9)
        cluster = sum(t - before[2].get(pid, 0.0) for pid, t in used.items())
        machine = busy - before[1]
        return {
            "machine_pct": 100 * machine / seconds,
            "cluster_pct": 100 * cluster / seconds,
            "rest_pct": 100 * max(machine - cluster, 0.0) / seconds,
        }


def _totals(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for workload in ("mcp", "send"):
        rows = [r for name, r in results.items() if name.endswith(workload) and "down" not in r]
        answered = sum(r["requests"] - _errors(r) for r in rows)
        totals[workload] = {
            "ok_per_s": answered / max(r["duration_s"] for r in rows),
            "errors": sum(_errors(r) for r in rows),
            "p99_ms_worst": max(r["p99_ms"] for r in rows if r["requests"]),
            "p50_ms_worst": max(r["p50_ms"] for r in rows if r["requests"]),
        }
    return totals


def _errors(result: dict[str, Any]) -> int:
    # wrk counts a refused connection under "connect" without a request; the others are answers
    # that failed (or never came).
    errors = result["errors"]
    return int(errors["bad_body"] + errors["status"] + errors["timeout"] + errors["read"])


class Takeover:
    """Polls the crawl's task and its pages after the kill: when another worker owns the task
    and when the next page is stored."""

    def __init__(self, dsn: str, task_id: str, site: str) -> None:
        self.dsn, self.task_id, self.site = dsn, task_id, site
        self.killed_at = 0.0
        self.taken_over_s: float | None = None
        self.resumed_s: float | None = None
        self.worker_before: int | None = None
        self.worker_after: int | None = None

    async def _poll(self, conn: asyncpg.Connection) -> tuple[int | None, str, int]:
        row = await conn.fetchrow("SELECT worker, state FROM tasks WHERE id = $1", self.task_id)
        pages = await conn.fetchval(
            "SELECT count(*) FROM documents WHERE uri LIKE $1", f"{self.site}%"
        )
        return row["worker"], row["state"], int(pages)

    def pages(self) -> int:
        async def count() -> int:
            conn = await asyncpg.connect(self.dsn)
            try:
                return (await self._poll(conn))[2]
            finally:
                await conn.close()

        return asyncio.run(count())

    def watch(self, limit_s: float) -> None:
        asyncio.run(self._watch(limit_s))

    async def _watch(self, limit_s: float) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            self.worker_before, _, _ = await self._poll(conn)
            self.killed_at = time.monotonic()
            pages_then = None
            while time.monotonic() - self.killed_at < limit_s:
                worker, state, pages = await self._poll(conn)
                since = time.monotonic() - self.killed_at
                if self.taken_over_s is None and worker != self.worker_before:
                    self.taken_over_s, self.worker_after, pages_then = since, worker, pages
                elif pages_then is not None and pages > pages_then:
                    self.resumed_s = since
                    return
                if state not in ("submitted", "working"):
                    return
                await asyncio.sleep(0.1)
        finally:
            await conn.close()


def run_cluster(
    count: int,
    tree: Path,
    environment: dict[str, str],
    queries: Path,
    seconds: float,
    cpu: ClusterCpu,
    restart_after: float,
) -> dict[str, Any]:
    replicas = [replica(i, tree, environment) for i in range(count)]
    site, site_url = serve_site(uuid.uuid4().hex[:8])
    try:
        for server in replicas:
            server.start(timeout=300)
            log(f"{server.name} ready in {server.startup_s:.1f} s")
        phase(replicas, queries, min(seconds, 5), cpu)  # warm-up
        log(f"{count} replicas: before")
        before = phase(replicas, queries, seconds, cpu)

        victim = replicas[1]
        crawl = send_skill(
            victim, "ingest_url", {"url": f"{site_url}/0", "depth": 1, "max_pages": SITE_PAGES}
        )
        takeover = Takeover(environment["DATABASE_URL"], crawl["id"], site_url)
        deadline = time.monotonic() + 120
        while takeover.pages() < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        log(f"{count} replicas: during (kill -9 of {victim.name}, back {restart_after:g} s later)")
        watcher = threading.Thread(target=takeover.watch, args=(120,))
        restarted: dict[str, float] = {}

        def restart() -> None:
            time.sleep(restart_after)
            victim.start(timeout=300)
            restarted["ready_s"] = time.monotonic() - takeover.killed_at

        restarter = threading.Thread(target=restart)

        def kill() -> None:
            watcher.start()
            while takeover.killed_at == 0.0:
                time.sleep(0.01)
            assert victim.process is not None
            os.kill(victim.process.pid, signal.SIGKILL)
            victim.process.wait(30)
            restarter.start()

        during = phase(replicas, queries, seconds, cpu, fault=kill)
        restarter.join()
        watcher.join()
        workers = workers_of(replicas, environment["DATABASE_URL"])
        rpc(replicas[0], "tasks/cancel", {"id": crawl["id"]})
        log(f"{count} replicas: after")
        after = phase(replicas, queries, seconds, cpu)
        return {
            "replicas": count,
            "phases": {"before": before, "during": during, "after": after},
            "kill": {
                "victim": victim.name,
                "restart_after_s": restart_after,
                "taken_over_by": workers.get(takeover.worker_after or 0, "?"),
                "restarted_ready_s": restarted.get("ready_s"),
                "takeover_s": takeover.taken_over_s,
                "first_page_after_takeover_s": takeover.resumed_s,
                "worker_before": takeover.worker_before,
                "worker_after": takeover.worker_after,
            },
        }
    finally:
        site.shutdown()
        for server in replicas:
            server.stop()


def render(result: dict[str, Any]) -> str:
    machine = result["machine"]
    lines = [
        "# Replicas under load while one is killed (bench/cluster.py)",
        "",
        f"{machine['date']}, revision {result['revision']}, {machine['cpus']} cores "
        f"({machine['cpu_model']}), load average at the start {machine['loadavg_start']}, "
        f"at the end {machine['loadavg_end']}. {result['note']}",
        "",
        f"Each phase {result['seconds']:g} s; per replica {MCP_CLIENTS} wrk connections of "
        f"`hybrid_retrieve` over MCP and {SEND_CLIENTS} of durable `message/send` (the default "
        "skill, `hybrid_retrieve`, as a stored task). ok/s: answers that were right, summed "
        "over the replicas; p50/p99: of the slowest replica; errors: failed or unanswered "
        "requests (refused connections to the killed replica are not requests, and not "
        "counted). CPU in % of one core over the phase: the cluster's processes (replicas, "
        "PostgreSQL, FalkorDB), and the rest of the machine (the wrk clients, a few % each, "
        "and everything else running on these cores).",
        "",
        "| replicas | phase | MCP ok/s | MCP p50 ms | MCP p99 ms | MCP errors "
        "| send ok/s | send p50 ms | send p99 ms | send errors | cluster CPU % | rest CPU % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cluster in result["clusters"]:
        for name, measured in cluster["phases"].items():
            mcp, send = measured["mcp"], measured["send"]
            cpu = measured["cpu"]
            lines.append(
                f"| {cluster['replicas']} | {name} | {mcp['ok_per_s']:.1f} | "
                f"{mcp['p50_ms_worst']:.0f} | {mcp['p99_ms_worst']:.0f} | {mcp['errors']} | "
                f"{send['ok_per_s']:.1f} | {send['p50_ms_worst']:.0f} | "
                f"{send['p99_ms_worst']:.0f} | {send['errors']} | {cpu['cluster_pct']:.0f} | "
                f"{cpu['rest_pct']:.0f} |"
            )
    lines += [
        "",
        "| replicas | killed | started again after s | back (ready) s | crawl taken over s "
        "| by | next page stored s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cluster in result["clusters"]:
        kill = cluster["kill"]
        by = kill["taken_over_by"]
        if by == kill["victim"]:
            by += " (started again)"
        lines.append(
            f"| {cluster['replicas']} | {kill['victim']} | {kill['restart_after_s']:g} | "
            f"{_s(kill['restarted_ready_s'])} | {_s(kill['takeover_s'])} | {by} | "
            f"{_s(kill['first_page_after_takeover_s'])} |"
        )
    lines += ["", "Times are from the kill. Every figure per replica is in the JSON file.", ""]
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", default="2,3", help="cluster sizes, in turn")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--revision", default="HEAD", help="the code the replicas run")
    parser.add_argument(
        "--late-restart",
        type=float,
        default=45.0,
        help="also the smallest cluster with the killed replica started this many seconds "
        "after the kill (0: not), so that a live replica takes its crawl over",
    )
    parser.add_argument("--output", default="cluster")
    parser.add_argument(
        "--note", default="", help="what the results file says of the machine's load"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    ensure_wrk()
    tree = export_revision(args.revision)
    revision = tree.name.removeprefix("rev-")
    kb, _, query_texts = asyncio.run(knowledge_base(PAGES))
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    queries = WORK / "queries.txt"
    queries.write_text("".join(orjson.dumps(q).decode()[1:-1] + "\n" for q in query_texts))
    log("copying the knowledge base for the cluster's PostgreSQL")
    # cp -a: the files keep their owner, the embedded server's system user.
    subprocess.run(["cp", "-a", str(kb), str(WORK / "postgres")], check=True)
    postgres = EmbeddedPostgres(WORK / "postgres")
    dsn = postgres.start()
    falkor = Falkor(WORK / "falkordb")
    environment = {
        **os.environ,
        "DATABASE_URL": dsn,
        "REDIS_URL": f"{falkor.url}/0",
        "AGENTIC_RAG_GRAPH_URL": falkor.url,
        "AGENTIC_RAG_INGEST_ALLOW_PRIVATE": "127.0.0.1",
        "AGENTIC_RAG_INGEST_HOST_INTERVAL_SECONDS": "0",
    }
    cpu = ClusterCpu(WORK / "postgres" / "postgres", falkor)
    machine = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    clusters = []
    try:
        sizes = [int(n) for n in args.replicas.split(",")]
        runs = [(count, 0.0) for count in sizes]
        if args.late_restart > 0:
            runs.append((sizes[0], args.late_restart))
        for count, restart_after in runs:
            clusters.append(
                run_cluster(count, tree, environment, queries, args.seconds, cpu, restart_after)
            )
    finally:
        falkor.stop()
        postgres.stop()
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {
        "machine": machine,
        "revision": revision,
        "seconds": args.seconds,
        "note": args.note,
        "corpus": {"pages": PAGES, "queries": len(query_texts)},
        "settings": {"sweep_seconds": 10, "lease_seconds": 30, "workers_per_replica": 1},
        "clusters": clusters,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    (RESULTS / f"{args.output}.md").write_text(render(result))
    print(render(result))


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


if __name__ == "__main__":
    main()
