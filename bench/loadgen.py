"""Load generators: wrk (message/send) and an asyncio SSE client (message/stream).

wrk drives every message/send measurement, the task fill included, through bench/lua/send.lua,
which makes a unique messageId per request and checks every answer. The SSE client is small and
raw (HTTP/1.1 over asyncio streams) so that 2000 concurrent streams cost it little.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil  # type: ignore[import-untyped]
from procs import Server

LUA_SEND = Path(__file__).resolve().parent / "lua" / "send.lua"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(math.ceil(pct / 100 * len(ordered)), 1)
    return ordered[rank - 1]


@dataclass
class WrkResult:
    connections: int
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    errors: dict[str, int]
    bad_sample: str
    server_cpu_pct: float
    tree_cpu_pct: float
    loadgen_cpu_pct: float
    other_cpu_pct: float  # the rest of the machine (other users of the shared cores)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def machine_busy() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


class QuietGate:
    """Before a measurement, wait (within a budget) until the rest of the machine is quiet.

    The cores are shared with other users; a measurement that starts during someone else's burst
    is needlessly noisy. Waiting costs nothing on a quiet machine (one short sample).
    """

    def __init__(self, threshold_pct: float, budget_s: float, window_s: float = 0.5) -> None:
        self.threshold_pct, self.budget_s, self.window_s = threshold_pct, budget_s, window_s
        self.waited_s = 0.0

    def wait(self, max_s: float = 15.0) -> float:
        """Wait until busy < threshold or the time runs out; returns the last busy % seen."""
        started = time.monotonic()
        while True:
            before = machine_busy()
            time.sleep(self.window_s)
            busy = 100 * (machine_busy() - before) / self.window_s
            spent = time.monotonic() - started
            if (
                busy < self.threshold_pct
                or spent >= max_s
                or self.waited_s + spent >= self.budget_s
            ):
                self.waited_s += spent
                return busy


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(
    server: Server,
    connections: int,
    duration_s: float,
    limit: int = 0,
    timeout_s: float = 30.0,
    *,
    script: Path = LUA_SEND,
    path: str = "/",
    script_args: Sequence[str] | None = None,
) -> WrkResult:
    """Run wrk (one thread) against `server` with message/send (or `script` at `path`, given
    `script_args` before the limit: bench/lua/mcp_call.lua).

    With `limit`, wrk stops after that many answers (or after `duration_s`, the upper bound).
    CPU of the server tree is measured over the run; wrk's own CPU comes from its rusage.
    """
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(math.ceil(duration_s), 1)}s",
        f"--timeout={math.ceil(timeout_s)}s",
        "-s",
        str(script),
        server.url.rstrip("/") + path,
        "--",
        *(script_args if script_args is not None else [uuid.uuid4().hex[:12]]),
        str(limit),
    ]
    cpu_before = server.cpu_snapshot()
    children_before = _children_cpu()
    busy_before = machine_busy()
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    summary: dict[str, Any] | None = None
    for line in proc.stdout:
        if line.startswith("BENCH_LIMIT_REACHED"):
            proc.send_signal(signal.SIGINT)  # wrk ends its sleep, joins and reports
        elif line.startswith("BENCH_JSON "):
            summary = orjson.loads(line[len("BENCH_JSON ") :])
    stderr = proc.stderr.read() if proc.stderr else ""
    proc.wait()
    wall = max(time.monotonic() - started, 1e-9)
    loadgen_cpu = 100 * (_children_cpu() - children_before) / wall
    server_cpu, tree_cpu = server.cpu_since(cpu_before)
    machine_cpu = 100 * (machine_busy() - busy_before) / wall
    if summary is None:
        raise RuntimeError(f"wrk gave no summary (exit {proc.returncode}): {stderr.strip()}")
    duration = summary["duration_us"] / 1e6
    return WrkResult(
        connections=connections,
        requests=summary["requests"],
        duration_s=round(duration, 3),
        rps=summary["requests"] / duration if duration else 0.0,
        p50_ms=summary["p50_us"] / 1000,
        p90_ms=summary["p90_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        max_ms=summary["max_us"] / 1000,
        mean_ms=summary["mean_us"] / 1000,
        errors=summary["errors"],
        bad_sample=summary["bad_sample"],
        server_cpu_pct=server_cpu,
        tree_cpu_pct=tree_cpu,
        loadgen_cpu_pct=loadgen_cpu,
        other_cpu_pct=max(machine_cpu - tree_cpu - loadgen_cpu, 0.0),
    )


# --- message/stream ----------------------------------------------------------------------------

_stream_ids = itertools.count(1)


def stream_request(text: str) -> bytes:
    n = next(_stream_ids)
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "message/stream",
            "params": {
                "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": text}],
                    "messageId": f"bench-stream-{uuid.uuid4().hex}",
                    "kind": "message",
                },
                "configuration": {"acceptedOutputModes": ["text/plain"]},
            },
        }
    )
    return (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


@dataclass
class StreamResult:
    ok: bool = False
    error: str = ""
    events: int = 0
    final_state: str = ""
    sent: float = 0.0
    headers_at: float = math.nan
    first_event_at: float = math.nan
    final_at: float = math.nan

    @property
    def ttfe_ms(self) -> float:
        return 1000 * (self.first_event_at - self.sent)

    @property
    def final_ms(self) -> float:
        return 1000 * (self.final_at - self.sent)


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> Any:
    """Yield the response body as it arrives (chunked, Content-Length, or until EOF)."""
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif b"content-length" in headers:
        yield await reader.readexactly(int(headers[b"content-length"]))
    else:
        while chunk := await reader.read(65536):
            yield chunk


async def run_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> StreamResult:
    """Send one message/stream request on an open connection and read the SSE answer."""
    result = StreamResult(sent=time.perf_counter())
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    result.headers_at = time.perf_counter()
    status_line, *header_lines = head.split(b"\r\n")
    status = int(status_line.split(b" ", 2)[1])
    headers = {}
    for line in header_lines:
        if b":" in line:
            key, value = line.split(b":", 1)
            headers[key.strip().lower()] = value.strip()
    if status != 200 or not headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        body = b"".join([chunk async for chunk in _body_chunks(reader, headers)])
        result.error = f"HTTP {status} {headers.get(b'content-type', b'')!r}: {body[:200]!r}"
        return result
    buffer = b""
    async for chunk in _body_chunks(reader, headers):
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            raw_event, buffer = buffer.split(b"\n\n", 1)
            data = b"\n".join(
                line[5:].lstrip(b" ")
                for line in raw_event.split(b"\n")
                if line.startswith(b"data:")
            )
            if not data:
                continue  # comment / keep-alive
            now = time.perf_counter()
            result.events += 1
            if result.events == 1:
                result.first_event_at = now
            message = orjson.loads(data)
            if "error" in message:
                result.error = f"JSON-RPC error event: {message['error']}"
                result.final_at = now
                continue
            event = message.get("result", {})
            kind = event.get("kind")
            if (kind == "status-update" and event.get("final")) or kind == "message":
                result.final_at = now
                result.final_state = (
                    event.get("status", {}).get("state", "") if kind != "message" else "message"
                )
    if math.isnan(result.final_at):
        result.error = result.error or f"stream ended after {result.events} events, no final"
    else:
        result.ok = result.final_state == "completed" and not result.error
        if not result.ok and not result.error:
            result.error = f"final state {result.final_state!r}"
    return result


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, limit=2**20)


async def _one_stream(port: int, text: str, limit_s: float) -> StreamResult:
    reader, writer = await _connect(port)
    try:
        return await asyncio.wait_for(run_stream(reader, writer, stream_request(text)), limit_s)
    finally:
        writer.close()


@dataclass
class StreamStats:
    streams: int
    ok: int
    failed: int
    errors: list[str] = field(default_factory=list)
    ttfe_p50_ms: float = math.nan
    ttfe_p99_ms: float = math.nan
    final_p50_ms: float = math.nan
    final_p99_ms: float = math.nan
    total_s: float = math.nan
    connected: int = 0
    peak_open: int = 0
    text: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stats(
    results: Sequence[StreamResult | BaseException], text: str, total_s: float = math.nan
) -> StreamStats:
    good = [r for r in results if isinstance(r, StreamResult) and r.ok]
    errors: dict[str, int] = {}
    for r in results:
        if isinstance(r, StreamResult) and r.ok:
            continue
        reason = r.error if isinstance(r, StreamResult) else f"{type(r).__name__}: {r}"
        errors[reason[:160]] = errors.get(reason[:160], 0) + 1
    # Most streams open at the same time, counted from the response headers to the final event.
    marks: list[tuple[float, int]] = []
    for r in good:
        marks += [(r.headers_at, 1), (r.final_at, -1)]
    open_now = peak = 0
    for _, delta in sorted(marks):
        open_now += delta
        peak = max(peak, open_now)
    return StreamStats(
        streams=len(results),
        ok=len(good),
        failed=len(results) - len(good),
        errors=[f"{count}x {reason}" for reason, count in sorted(errors.items())][:5],
        ttfe_p50_ms=percentile([r.ttfe_ms for r in good], 50),
        ttfe_p99_ms=percentile([r.ttfe_ms for r in good], 99),
        final_p50_ms=percentile([r.final_ms for r in good], 50),
        final_p99_ms=percentile([r.final_ms for r in good], 99),
        total_s=total_s,
        peak_open=peak,
        text=text,
    )


async def sequential_streams(port: int, count: int, text: str, limit_s: float) -> StreamStats:
    """`count` streams one after the other, each on a fresh connection."""
    results: list[StreamResult | BaseException] = []
    started = time.perf_counter()
    for _ in range(count):
        try:
            results.append(await _one_stream(port, text, limit_s))
        except Exception as exc:
            results.append(exc)
    stats = _stats(results, text, time.perf_counter() - started)
    stats.connected = count
    return stats


async def concurrent_streams(port: int, count: int, text: str, limit_s: float) -> StreamStats:
    """Open `count` connections, then send every request at once and read all streams."""
    connections = await asyncio.gather(
        *(_connect(port) for _ in range(count)), return_exceptions=True
    )
    opened = [c for c in connections if not isinstance(c, BaseException)]
    requests = [stream_request(text) for _ in opened]
    started = time.perf_counter()
    try:
        results: list[StreamResult | BaseException] = list(
            await asyncio.gather(
                *(
                    asyncio.wait_for(run_stream(reader, writer, request), limit_s)
                    for (reader, writer), request in zip(opened, requests, strict=True)
                ),
                return_exceptions=True,
            )
        )
    finally:
        for _, writer in opened:
            writer.close()
    finished = [r.final_at for r in results if isinstance(r, StreamResult) and r.ok]
    total = (max(finished) - started) if finished else math.nan
    results += [c for c in connections if isinstance(c, BaseException)]
    stats = _stats(results, text, total)
    stats.connected = len(opened)
    return stats
