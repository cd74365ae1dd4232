"""Benchmark ours, the floor and the a2a-sdk 0.2.16 reference side by side, in one run.

    .venv/bin/python bench/run.py            # full run, about 15 minutes on 2 cores
    .venv/bin/python bench/run.py --quick    # a couple of minutes, smaller numbers

Sets up what it needs (wrk through apt, bench/.venv-reference through uv or pip), then:
  1. message/send throughput and latency at concurrency 1, 16, 64 (wrk), all three servers up,
     interleaved in rounds so that the machine's noise hits them alike;
  2. for each server on its own, fresh: fill tasks through the API, probing message/send latency and
     sampling RSS at checkpoints up to 100k stored tasks;
  3. on that same server: message/stream time to first and final event, then 2000 concurrent
     streams (plain echo, and held open by a task that takes a while).
Writes bench/results/latest.json and bench/results/latest.md. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import glob
import hashlib
import importlib.metadata
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil  # type: ignore[import-untyped]
from loadgen import (
    QuietGate,
    WrkResult,
    concurrent_streams,
    machine_busy,
    run_wrk,
    sequential_streams,
)
from procs import Server, free_port
from report import render_markdown

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
RESULTS = BENCH / "results"
REFERENCE_VENV = BENCH / ".venv-reference"
REFERENCE_REQUIREMENTS = BENCH / "reference" / "requirements.txt"
PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"
RUN_SUT = ROOT / "conformance" / "run-sut"
SERVER_NAMES = ("floor", "reference", "ours", "ours-1")
OURS_WORKERS = 2  # `ours` as an operator of these 2-core machines runs it; `ours-1`: one process
THROUGHPUT_ONLY = {"ours-1"}  # measured beside the others for comparison, in phase 1 only
CONCURRENCY = (1, 16, 64)


@dataclass(frozen=True)
class Plan:
    """How much of everything to do; `full` fits ~15 minutes on 2 cores, `quick` ~2."""

    mode: str
    rounds: int
    warmup_s: int
    measure_s: int
    checkpoints: tuple[int, ...]
    edge_probes: int  # probes at the first and last checkpoint (median p99 of these)
    probe_requests: int
    probe_concurrency: int
    fill_concurrency: int
    rss_baseline: int  # checkpoint from which RSS must stay flat
    sequential_streams: int
    concurrent_streams: int
    held_task: str  # run-sut's "task N D": N working updates D ms apart
    quiet_pct: float = 50.0  # wait before a throughput measurement until the machine is this idle
    quiet_budget_s: float = 90.0  # ... but never longer than this in all

    @staticmethod
    def full() -> Plan:
        return Plan(
            mode="full",
            rounds=5,  # the cores are shared: medians of 5 are steadier than of 3
            warmup_s=2,
            measure_s=6,
            checkpoints=(1000, *range(10_000, 100_001, 10_000)),
            edge_probes=3,
            probe_requests=1000,
            probe_concurrency=16,
            fill_concurrency=64,
            rss_baseline=10_000,
            sequential_streams=200,
            concurrent_streams=2000,
            held_task="task 4 500",
        )

    @staticmethod
    def quick() -> Plan:
        return Plan(
            mode="quick",
            rounds=1,
            warmup_s=1,
            measure_s=3,
            checkpoints=(1000, 5000, 10_000),
            edge_probes=1,
            probe_requests=1000,
            probe_concurrency=16,
            fill_concurrency=64,
            rss_baseline=5000,
            sequential_streams=50,
            concurrent_streams=500,
            held_task="task 2 500",
        )


def write_results(name: str, report: dict[str, Any], rendered: str) -> None:
    """`report` as results/NAME.json and `rendered` as results/NAME.md (NAME: a file name, not a
    path), and the Markdown on standard output."""
    if Path(name).name != name:
        raise SystemExit(f"--output takes a name for bench/results/, not a path: {name!r}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    (RESULTS / f"{name}.md").write_text(rendered)
    print(rendered)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- setup -------------------------------------------------------------------------------------


def ensure_wrk() -> None:
    if shutil.which("wrk"):
        return
    log("wrk is missing: installing the Debian package")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, env=env)


def _is_python312(path: str) -> bool:
    try:
        out = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return False
    return out.stdout.strip() == "True"


def find_python312() -> str:
    candidates = [
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
        "/usr/local/bin/python3.12",
        "/usr/bin/python3.12",
        getattr(sys, "_base_executable", None),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and _is_python312(candidate):
            return candidate
    raise SystemExit("Python 3.12 not found (needed for bench/.venv-reference)")


def ensure_reference_venv() -> None:
    digest = hashlib.sha256(REFERENCE_REQUIREMENTS.read_bytes()).hexdigest()
    stamp = REFERENCE_VENV / ".requirements.sha256"
    python = REFERENCE_VENV / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return
    log(f"creating {REFERENCE_VENV.relative_to(ROOT)} from {REFERENCE_REQUIREMENTS.name}")
    shutil.rmtree(REFERENCE_VENV, ignore_errors=True)
    interpreter = find_python312()
    uv = next(
        (u for u in (str(ROOT / ".tools/bin/uv"), shutil.which("uv")) if u and Path(u).exists()),
        None,
    )
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    if uv:
        subprocess.run(
            [uv, "venv", "-q", "--python", interpreter, str(REFERENCE_VENV)], check=True, env=env
        )
        subprocess.run(
            [uv, "pip", "install", "-q", "-p", str(python), "-r", str(REFERENCE_REQUIREMENTS)],
            check=True,
            env=env,
        )
    else:
        subprocess.run([interpreter, "-m", "venv", str(REFERENCE_VENV)], check=True)
        install = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
             str(REFERENCE_REQUIREMENTS)],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if install.returncode:
            sys.stderr.write(install.stdout + install.stderr)
            raise SystemExit("pip install of bench/reference/requirements.txt failed")
    stamp.write_text(digest + "\n")


# --- servers -----------------------------------------------------------------------------------

_data_dirs: list[Path] = []


def make_server(name: str, tag: str) -> Server:
    port = free_port()
    logs = WORK / "logs" / f"{name}.log"
    if name == "floor":
        command = [
            str(PROJECT_PYTHON), "-m", "uvicorn", "floor_app:app", "--app-dir", str(BENCH),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
    elif name == "reference":
        command = [
            str(REFERENCE_VENV / "bin" / "python"), str(BENCH / "reference" / "server.py"),
            "--port", str(port),
        ]  # fmt: skip
    elif name in ("ours", "ours-1"):
        data_dir = WORK / "data" / f"{name}-{tag}"
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        _data_dirs.append(data_dir)
        command = [
            str(PROJECT_PYTHON),
            str(RUN_SUT),
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--workers",
            str(OURS_WORKERS if name == "ours" else 1),
        ]
    else:
        raise ValueError(name)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = Server(name=name, command=command, port=port, log_path=logs, cwd=ROOT, env=env)
    if name in ("ours", "ours-1"):
        server.postgres_dir = (data_dir / "postgres").resolve()
    return server


@contextlib.contextmanager
def running(
    servers: list[Server], failures: dict[str, str] | None = None
) -> Iterator[list[Server]]:
    """Start the servers; yield those that came up. Without `failures`, any failure raises."""
    started: list[Server] = []
    try:
        for server in servers:
            log(f"starting {server.name} on port {server.port}")
            try:
                server.start()
            except RuntimeError as exc:
                if failures is None:
                    raise
                log(f"  !! {server.name} did not start: {exc}")
                failures[server.name] = str(exc)
                server.stop()
                continue
            started.append(server)
            log(f"{server.name} ready in {server.startup_s:.1f}s (pid {server.server_pid})")
        yield started
    finally:
        for server in servers:
            server.stop()
        for data_dir in _data_dirs:
            shutil.rmtree(data_dir, ignore_errors=True)
        _data_dirs.clear()


# --- phases ------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _check(result: WrkResult, what: str) -> None:
    if result.error_count:
        log(f"  !! {what}: {result.errors} sample: {result.bad_sample[:200]}")


def phase_throughput(plan: Plan, names: list[str]) -> dict[str, Any]:
    """message/send req/s and latency at each concurrency, servers interleaved in rounds.

    Every round starts the servers fresh, so that the tasks stored in earlier rounds (in the
    reference's memory, in ours' database) weigh on no round more than on another.
    """
    raw: dict[str, dict[int, list[WrkResult]]] = {n: {c: [] for c in CONCURRENCY} for n in names}
    startup: dict[str, list[float]] = {n: [] for n in names}
    quiet_before: dict[str, dict[int, list[float]]] = {
        n: {c: [] for c in CONCURRENCY} for n in names
    }
    failures: dict[str, str] = {}
    gate = QuietGate(threshold_pct=plan.quiet_pct, budget_s=plan.quiet_budget_s)
    for round_no in range(plan.rounds):
        servers = [make_server(name, f"throughput-{round_no}") for name in names]
        with running(servers, failures) as up:
            for server in up:
                startup[server.name].append(round(server.startup_s, 2))
            order = up[round_no % len(up) :] + up[: round_no % len(up)] if up else []
            for connections in CONCURRENCY:
                for server in order:
                    run_wrk(server, connections, plan.warmup_s)
                    busy = gate.wait()
                    quiet_before[server.name][connections].append(round(busy, 1))
                    result = run_wrk(server, connections, plan.measure_s)
                    _check(result, f"{server.name} c={connections}")
                    raw[server.name][connections].append(result)
                    log(
                        f"round {round_no + 1}/{plan.rounds} {server.name:9} c={connections:<3} "
                        f"{result.rps:8.0f} req/s  p50 {result.p50_ms:7.2f} ms  "
                        f"p99 {result.p99_ms:7.2f} ms  cpu {result.server_cpu_pct:3.0f}%"
                        f"/{result.tree_cpu_pct:3.0f}%  wrk {result.loadgen_cpu_pct:3.0f}%"
                        f"  other {result.other_cpu_pct:3.0f}%"
                    )
    summary: dict[str, Any] = {}
    for name, by_c in raw.items():
        summary[name] = {}
        for connections, runs in by_c.items():
            summary[name][str(connections)] = {
                "rps": _median([r.rps for r in runs]),
                "p50_ms": _median([r.p50_ms for r in runs]),
                "p90_ms": _median([r.p90_ms for r in runs]),
                "p99_ms": _median([r.p99_ms for r in runs]),
                "server_cpu_pct": _median([r.server_cpu_pct for r in runs]),
                "tree_cpu_pct": _median([r.tree_cpu_pct for r in runs]),
                "loadgen_cpu_pct": _median([r.loadgen_cpu_pct for r in runs]),
                "other_cpu_pct": _median([r.other_cpu_pct for r in runs]),
                "errors": sum(r.error_count for r in runs),
                "rounds": [r.as_dict() for r in runs],
                "machine_busy_before_pct": quiet_before[name][connections],
            }
    return {
        "startup_s": {name: _median(times) for name, times in startup.items()},
        "startup_rounds_s": startup,
        "quiet_wait_s": round(gate.waited_s, 1),
        "errors": failures,
        "servers": summary,
    }


def _run_async[T](factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(factory())
    return uvloop.run(factory())


def _measured[T](server: Server, work: Callable[[], T]) -> tuple[T, dict[str, float]]:
    """Run `work` (the SSE client, in this process); CPU of the server, the client, the rest."""
    cpu_before = server.cpu_snapshot()
    busy_before = machine_busy()
    self_before = _self_cpu()
    started = time.monotonic()
    result = work()
    wall = max(time.monotonic() - started, 1e-9)
    server_cpu, tree_cpu = server.cpu_since(cpu_before)
    client_cpu = 100 * (_self_cpu() - self_before) / wall
    machine = 100 * (machine_busy() - busy_before) / wall
    return result, {
        "server_cpu_pct": server_cpu,
        "tree_cpu_pct": tree_cpu,
        "client_cpu_pct": client_cpu,
        "other_cpu_pct": max(machine - tree_cpu - client_cpu, 0.0),
    }


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def phase_accumulate_and_stream(
    plan: Plan, name: str, gate: QuietGate
) -> tuple[dict[str, Any], dict[str, Any]]:
    """On one fresh server: fill tasks with probes and RSS samples, then the streaming tests."""
    server = make_server(name, "accumulate")
    checkpoints: list[dict[str, Any]] = []
    streams: dict[str, Any] = {}
    with running([server]):
        stored = 1  # the readiness probe made one task
        for target in plan.checkpoints:
            fill: WrkResult | None = None
            if target > stored:
                fill = run_wrk(server, plan.fill_concurrency, duration_s=900, limit=target - stored)
                _check(fill, f"{name} fill to {target}")
                stored += fill.requests
            is_edge = target in (plan.checkpoints[0], plan.checkpoints[-1])
            probes = []
            at_probe = stored
            for _ in range(plan.edge_probes if is_edge else 1):
                if is_edge:
                    gate.wait()
                probe = run_wrk(
                    server, plan.probe_concurrency, duration_s=300, limit=plan.probe_requests
                )
                _check(probe, f"{name} probe at {target}")
                stored += probe.requests
                probes.append(probe)
            time.sleep(0.5)
            rss, tree_pss = server.memory()
            row = {
                "target": target,
                "tasks": at_probe,
                "p50_ms": _median([p.p50_ms for p in probes]),
                "p99_ms": _median([p.p99_ms for p in probes]),
                "probe_p99s_ms": [p.p99_ms for p in probes],
                "probe_rps": _median([p.rps for p in probes]),
                "other_cpu_pct": _median([p.other_cpu_pct for p in probes]),
                "fill_rps": fill.rps if fill else None,
                "errors": sum(p.error_count for p in probes) + (fill.error_count if fill else 0),
                "rss_mib": round(rss, 1),
                "tree_pss_mib": round(tree_pss, 1),
            }
            checkpoints.append(row)
            log(
                f"{name:9} {at_probe:>7} tasks  p50 {row['p50_ms']:7.2f} ms  "
                f"p99 {row['p99_ms']:7.2f} ms  RSS {rss:7.1f} MiB  tree PSS {tree_pss:7.1f} MiB"
                + (f"  fill {fill.rps:6.0f} req/s" if fill else "")
            )
        port = server.port
        gate.wait()
        sequential, cpu = _measured(
            server,
            lambda: _run_async(
                functools.partial(
                    sequential_streams, port, plan.sequential_streams, "hello stream", 30
                )
            ),
        )
        log(
            f"{name:9} {sequential.ok}/{sequential.streams} sequential streams  "
            f"first event p50 {sequential.ttfe_p50_ms:.2f} ms p99 {sequential.ttfe_p99_ms:.2f} ms"
            f"  final p50 {sequential.final_p50_ms:.2f} ms p99 {sequential.final_p99_ms:.2f} ms"
        )
        streams["sequential"] = {**sequential.as_dict(), **cpu}
        for label, text in (
            ("concurrent_echo", "hello stream"),
            ("concurrent_held", plan.held_task),
        ):
            gate.wait()
            stats, cpu = _measured(
                server,
                functools.partial(
                    _run_async,
                    functools.partial(concurrent_streams, port, plan.concurrent_streams, text, 120),
                ),
            )
            rss, tree_pss = server.memory()
            streams[label] = {**stats.as_dict(), **cpu, "rss_mib_after": round(rss, 1)}
            log(
                f"{name:9} {label}: {stats.ok}/{stats.streams} ok ({stats.connected} connected) "
                f"in {stats.total_s:.2f}s, peak open {stats.peak_open}, "
                f"first event p99 {stats.ttfe_p99_ms:.0f} ms, final p99 {stats.final_p99_ms:.0f} ms"
                + (f"  errors: {stats.errors}" if stats.errors else "")
            )
    return {"checkpoints": checkpoints}, streams


# --- targets and metadata ----------------------------------------------------------------------


def compute_targets(results: dict[str, Any], plan: Plan) -> list[dict[str, Any]]:
    targets: list[dict[str, Any]] = []
    throughput = results["throughput"]["servers"]
    if "ours" in throughput and "reference" in throughput:
        for connections in (16, 64):
            ours = throughput["ours"][str(connections)]["rps"]
            ref = throughput["reference"][str(connections)]["rps"]
            ratio = ours / ref if ref else float("nan")
            targets.append(
                {
                    "target": f"ours req/s >= 2x reference at concurrency {connections}",
                    "value": f"{ratio:.2f}x ({ours:.0f} vs {ref:.0f} req/s)",
                    "ratio": ratio,
                    "pass": ratio >= 2.0,
                }
            )
    ours_acc = results["accumulation"].get("ours")
    if ours_acc:
        rows = ours_acc["checkpoints"]
        first, last = rows[0], rows[-1]
        ratio = last["p99_ms"] / first["p99_ms"] if first["p99_ms"] else float("nan")
        targets.append(
            {
                "target": (
                    f"ours p99 after {last['target'] // 1000}k tasks <= 1.5x p99 after "
                    f"{first['target'] // 1000}k"
                ),
                "value": f"{ratio:.2f}x ({last['p99_ms']:.2f} vs {first['p99_ms']:.2f} ms)",
                "ratio": ratio,
                "pass": ratio <= 1.5,
            }
        )
        base = next((r for r in rows if r["target"] == plan.rss_baseline), rows[0])
        growth = last["rss_mib"] / base["rss_mib"] - 1 if base["rss_mib"] else float("nan")
        targets.append(
            {
                "target": (
                    f"ours RSS flat: growth from {base['target'] // 1000}k to "
                    f"{last['target'] // 1000}k tasks <= 10%"
                ),
                "value": (
                    f"{100 * growth:+.1f}% ({base['rss_mib']:.1f} -> {last['rss_mib']:.1f} MiB)"
                ),
                "ratio": 1 + growth,
                "pass": growth <= 0.10,
            }
        )
    return targets


def _version_in(python: Path, packages: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    )
    try:
        out = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True)
        return dict(orjson.loads(out.stdout))
    except (OSError, ValueError):
        return {}


def machine_info() -> dict[str, Any]:
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    wrk_banner = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    wrk_version = wrk_banner.split("Copyright")[0].strip()
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    project = {}
    for package in ("uvicorn", "starlette", "uvloop", "httptools", "orjson"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            project[package] = importlib.metadata.version(package)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model,
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "wrk": wrk_version,
        "git": git,
        "ours_workers": OURS_WORKERS,
        "project_packages": project,
        "reference_packages": _version_in(
            REFERENCE_VENV / "bin" / "python", ["a2a-sdk", "uvicorn", "starlette", "pydantic"]
        ),
    }


# --- main --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a couple of minutes, small numbers")
    parser.add_argument(
        "--only",
        default=",".join(SERVER_NAMES),
        help="comma-separated subset of floor,reference,ours,ours-1 (default: all)",
    )
    parser.add_argument("--output", default="latest", help="results file stem (default: latest)")
    parser.add_argument(
        "--skip", default="", help="comma-separated phases to skip: throughput,accumulate"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    plan = Plan.quick() if args.quick else Plan.full()
    names = [n for n in SERVER_NAMES if n in args.only.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    if "ours" in names and not RUN_SUT.exists():
        raise SystemExit(f"{RUN_SUT} does not exist yet; use --only floor,reference")
    ensure_wrk()
    if "reference" in names:
        ensure_reference_venv()
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": machine_info(),
        "plan": plan.__dict__,
        "servers": names,
        "throughput": {"startup_s": {}, "servers": {}},
        "accumulation": {},
        "streams": {},
    }
    log(f"benchmark ({plan.mode}) of {', '.join(names)}")
    if "throughput" not in skip:
        results["throughput"] = phase_throughput(plan, names)
    if "accumulate" not in skip:
        gate = QuietGate(threshold_pct=plan.quiet_pct, budget_s=plan.quiet_budget_s)
        for name in (n for n in names if n not in THROUGHPUT_ONLY):
            try:
                acc, streams = phase_accumulate_and_stream(plan, name, gate)
            except RuntimeError as exc:
                log(f"  !! {name}: {exc}")
                acc, streams = {"error": str(exc)}, {"error": str(exc)}
            results["accumulation"][name], results["streams"][name] = acc, streams
    results["meta"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    results["targets"] = compute_targets(results, plan)

    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"{args.output}.json"
    md_path = RESULTS / f"{args.output}.md"
    json_path.write_bytes(
        orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
    md_path.write_text(render_markdown(results))
    log(f"wrote {json_path.relative_to(ROOT)} and {md_path.relative_to(ROOT)}")
    print(md_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
