"""Where does a server's time go under message/send load? py-spy, sampled while wrk runs.

    .venv/bin/python bench/profile.py                       # ours (1 worker), c16, 20 s
    .venv/bin/python bench/profile.py --server reference --seconds 10 --fill 10000

Installs py-spy into bench/.venv-tools (gitignored) if needed, starts the server fresh (as
bench/run.py does), optionally fills tasks, then records the server process with py-spy while wrk
drives `message/send`. Writes the collapsed stacks to bench/.work/profile-SERVER-cN.txt, a
speedscope file beside it, and a summary (own samples by package, top functions by own and by
inclusive samples) to bench/results/profile-SERVER-cN.md.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from loadgen import WrkResult, run_wrk
from run import (
    BENCH,
    RESULTS,
    ROOT,
    WORK,
    ensure_reference_venv,
    ensure_wrk,
    find_python312,
    log,
    make_server,
    running,
)
from send_cpu import ours_at, overlaid

TOOLS_VENV = BENCH / ".venv-tools"
PY_SPY = TOOLS_VENV / "bin" / "py-spy"


def ensure_py_spy() -> None:
    if PY_SPY.exists():
        return
    log("installing py-spy into bench/.venv-tools")
    subprocess.run([find_python312(), "-m", "venv", str(TOOLS_VENV)], check=True)
    subprocess.run(
        [str(TOOLS_VENV / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", "py-spy"],
        check=True,
        capture_output=True,
    )  # fmt: skip


Counts = list[tuple[str, int]]
_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>[^:()]*)(?::\d+)?\)$")


def _function(frame: str) -> str:
    """`Func (pkg/mod.py:12)` -> `Func (pkg/mod.py)`: one row per function, not per line."""
    match = _FRAME.match(frame)
    return f"{match['func']} ({match['path']})" if match else frame


def _area(frame: str) -> str:
    """Where a frame's code lives: a package, or ours' module."""
    match = _FRAME.match(frame)
    if not match:
        return frame
    path = match["path"]
    if frame.startswith("Runner.run (asyncio/runners.py"):
        return "event loop itself (uvloop, C: sockets, callbacks)"
    if path.startswith(("agentic_rag/", "conformance/")):
        return path.removesuffix(".py").replace("/", ".")
    if path.startswith("<frozen") or "/" not in path:
        return "stdlib (" + path.removesuffix(".py").strip("<>") + ")"
    return path.split("/", 1)[0]


@dataclass
class Profile:
    samples: int
    own_by_area: Counts
    own_by_function: Counts
    inclusive_by_function: Counts


def summarize(collapsed: Path, top: int) -> Profile:
    """Own and inclusive samples from py-spy's collapsed stacks."""
    own_area: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        own[_function(frames[-1])] += count
        own_area[_area(frames[-1])] += count
        for function in {_function(frame) for frame in frames}:
            inclusive[function] += count
    return Profile(
        total, own_area.most_common(top), own.most_common(top), inclusive.most_common(top)
    )


def _rows(counts: Counts, samples: int) -> list[str]:
    return [f"| {100 * n / samples:.1f} | {n} | `{frame}` |" for frame, n in counts]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # One process to sample: ours with one worker (its workers are alike).
    parser.add_argument("--server", default="ours-1", choices=("ours-1", "reference", "floor"))
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--fill", type=int, default=0, help="tasks to store first")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--revision", help="ours-1 running this revision's code instead of the work tree's"
    )
    parser.add_argument(
        "--overlay", nargs="*", default=[], help="with --revision: these work-tree files over it"
    )
    args = parser.parse_args()
    ensure_wrk()
    ensure_py_spy()
    if args.server == "reference":
        ensure_reference_venv()
    WORK.mkdir(parents=True, exist_ok=True)
    stem = f"profile-{args.server}-c{args.concurrency}"
    collapsed = WORK / f"{stem}.txt"
    speedscope = WORK / f"{stem}.speedscope.json"
    if args.revision is not None:
        server = ours_at(overlaid(args.revision, args.overlay), args.server, "profile")
        stem += f"-{args.revision}"
        collapsed, speedscope = WORK / f"{stem}.txt", WORK / f"{stem}.speedscope.json"
    else:
        server = make_server(args.server, "profile")
    with running([server]):
        if args.fill:
            run_wrk(server, 64, duration_s=900, limit=args.fill)
        run_wrk(server, args.concurrency, 2)  # warm-up
        result: list[WrkResult] = []
        load = threading.Thread(
            target=lambda: result.append(run_wrk(server, args.concurrency, args.seconds + 2))
        )
        load.start()
        time.sleep(1)
        pid = str(server.server_pid)
        common = ["--pid", pid, "--rate", str(args.rate), "--nonblocking"]
        spy = [str(PY_SPY), "record", *common, "--duration", str(args.seconds)]
        subprocess.run([*spy, "--format", "raw", "--output", str(collapsed)], check=True)
        load.join()
        run_wrk(server, args.concurrency, 1)
        load = threading.Thread(
            target=lambda: result.append(run_wrk(server, args.concurrency, args.seconds // 2 + 2))
        )
        load.start()
        time.sleep(1)
        spy[-1] = str(max(args.seconds // 2, 1))
        subprocess.run(
            [*spy, "--format", "speedscope", "--output", str(speedscope)],
            check=True,
            capture_output=True,
        )
        load.join()
    profile = summarize(collapsed, args.top)
    samples = max(profile.samples, 1)
    wrk = result[0]
    expected = args.rate * args.seconds
    lines = [
        f"# py-spy profile: {args.server}, message/send at concurrency {args.concurrency}",
        "",
        f"- {time.strftime('%F %T %Z')}; {args.seconds} s at {args.rate} Hz "
        f"(non-blocking sampling), after {args.fill} stored tasks",
        f"- load during the recording: {wrk.rps:.0f} req/s, p50 {wrk.p50_ms:.2f} ms, "
        f"p99 {wrk.p99_ms:.2f} ms, server CPU {wrk.server_cpu_pct:.0f}%, "
        f"with children {wrk.tree_cpu_pct:.0f}%",
        f"- {profile.samples} busy samples of ~{expected} "
        f"({100 * profile.samples / max(expected, 1):.0f}%: the process was on the CPU; in the "
        "rest it sat idle in the event loop, waiting on sockets, e.g. PostgreSQL); the "
        "percentages below are of the busy samples",
        f"- stacks: {collapsed.relative_to(ROOT)}, speedscope: {speedscope.relative_to(ROOT)}",
        "",
        "## Own samples by package (ours: by module)",
        "",
        "| % busy | samples | where |",
        "| ---: | ---: | --- |",
        *_rows(profile.own_by_area, samples),
        "",
        "## Top functions by own samples",
        "",
        "| % busy | samples | function |",
        "| ---: | ---: | --- |",
        *_rows(profile.own_by_function, samples),
        "",
        "## Top functions by inclusive samples (own + what they call)",
        "",
        "| % busy | samples | function |",
        "| ---: | ---: | --- |",
        *_rows(profile.inclusive_by_function, samples),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{stem}.md"
    out.write_text("\n".join(lines))
    log(f"wrote {out.relative_to(ROOT)}")
    print("\n".join(lines[: 12 + len(profile.own_by_area)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
