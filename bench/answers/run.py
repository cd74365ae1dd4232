"""The answer benchmark (issue 17, points 10-11): questions with known answers over real
documentation, answered by the product's `hybrid_retrieve` path (retrieval, then the answer and
its grounding check) with each answerer.

    .venv/bin/python bench/answers/run.py                         # extractive and the double
    .venv/bin/python bench/answers/run.py --local                 # also the packaged local model
    .venv/bin/python bench/answers/run.py --local-gguf NAME=PATH  # also another GGUF (repeatable)
    .venv/bin/python bench/answers/run.py --limit 10              # the first 10 questions

The pages (questions.json) are read from the Debian packages sqlite3-doc and git-doc, installed
with apt-get when missing, served on 127.0.0.1 and ingested through `KnowledgeService.ingest_url`
into a temporary data directory. Each question is answered with every answerer:

- `extractive`: no LLM;
- `double`: the hosted-LLM test double (tests/support/knowledge.py's KnowledgeChatDouble,
  answering with hosted_double.py: one answer in five is one of the failures real models make);
- `local:NAME`: a GGUF model run by llama.cpp in process, as `AGENTIC_RAG_LLM_LOCAL` runs it.

For each answerer: accuracy (the returned answer holds the known answer), the returned answers
that contradict the known answer, those whose claim their cited passages do not support (no
citation, or no cited passage holds the known answer's evidence), and for the LLMs the same for
their own answers before the check, how often the check withheld one and why, and the seconds
per answer (retrieval included). Results: bench/answers/results.{json,md}.
"""

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import hosted_double

from agentic_rag.config import Settings
from agentic_rag.ids import new_id
from agentic_rag.knowledge.results import CrawlRequest, SearchResult
from agentic_rag.knowledge.service import KnowledgeService
from agentic_rag.knowledge.store.search import Filters
from agentic_rag.llm.configured import open_chat
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.postgres import connect

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.knowledge import KnowledgeChatDouble  # noqa: E402
from tests.support.live import serve_in_thread  # noqa: E402

QUESTIONS = HERE / "questions.json"
TENANT = "bench"
TOP_K = 5  # hybrid_retrieve's default
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")


# -- scoring against the known answers ------------------------------------------------------


def _normal(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.replace("`", ""))
    return " ".join(text.split()).lower()


def _holds(text: str, phrases: list[str]) -> bool:
    normal = _normal(text)
    return any(re.search(rf"(?<![\w-]){re.escape(_normal(p))}(?![\w])", normal) for p in phrases)


def said_yes_no(text: str) -> str | None:
    found = _YES_NO.match(text)
    return found.group(1).lower() if found else None


def correct(question: dict[str, Any], text: str, mode: str) -> bool:
    if question["kind"] == "yesno":
        said = said_yes_no(text) if mode == "llm" else None
        if said is not None:
            return said == question["expected"]
        return _holds(text, question["evidence"])
    return _holds(text, question["expected"])


def contradicts(question: dict[str, Any], text: str, mode: str, passages: list[str]) -> bool:
    """An LLM answer that says the opposite of its cited passages: the other Yes/No than the
    known answer (which is what the page says), or a number none of its cited passages states
    (nor the question), such as 4.6.19 for 3.6.19. Quotes (extractive) assert nothing."""
    if mode != "llm":
        return False
    if question["kind"] == "yesno":
        said = said_yes_no(text)
        return said is not None and said != question["expected"]
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", text)]
    evidence = " ".join(passages[n - 1] for n in cited if 1 <= n <= len(passages))
    known = set(_numbers(evidence or " ".join(passages))) | set(_numbers(question["question"]))
    return any(n not in known for n in _numbers(re.sub(r"\[\d+\]", "", text)))


def unsupported(question: dict[str, Any], text: str, mode: str, passages: list[str]) -> bool:
    """An LLM answer whose claim its cited passages do not support: it cites none, or none of
    the passages it cites holds the known answer's evidence (the phrase of the page that
    answers the question). Judged from the known answers, not by the product's check."""
    if mode != "llm":
        return False
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
    evidence = " ".join(passages[n - 1] for n in sorted(cited) if 1 <= n <= len(passages))
    return not evidence or not _holds(evidence, question["evidence"])


def _numbers(text: str) -> list[str]:
    """Numbers written alone (not inside names such as sqlite3_limit), without thousands
    separators."""
    return [m.replace(",", "") for m in _NUMBER.findall(text)]


# -- the corpus ---------------------------------------------------------------------------------


def documentation(corpus: dict[str, Any]) -> dict[str, Path]:
    """The package directories of the pages, installing the packages if needed."""
    directories = {package: Path(path) for package, path in corpus["packages"].items()}
    missing = [p for p, d in directories.items() if not d.is_dir()]
    if missing:
        print(f"installing {' '.join(missing)} with apt-get", flush=True)
        command = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
        subprocess.run(command, check=True)
    return directories


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged."""


def serve(directory: Path) -> tuple[ThreadingHTTPServer, str]:
    handler = partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


async def quiet(_: str) -> None:
    """Progress reports go nowhere."""


async def ingest(service: KnowledgeService, corpus: dict[str, Any]) -> dict[str, Any]:
    directories = documentation(corpus)
    package_of = {"sqlite3": "sqlite3-doc", "git-doc": "git-doc"}
    pages = 0
    for group, names in corpus["pages"].items():
        server, url = serve(directories[package_of[group]])
        try:
            for name in names:
                summary = await service.ingest_url(
                    TENANT, new_id(), quiet, CrawlRequest(url=f"{url}/{name}.html", depth=0)
                )
                if summary.ingested + summary.unchanged != 1:
                    raise RuntimeError(f"{name}.html was not ingested: {summary}")
                pages += 1
        finally:
            server.shutdown()
    return {"pages": pages}


# -- the answerers --------------------------------------------------------------------------


@asynccontextmanager
async def answerer(
    name: str, settings: Settings, pool: Any, gguf: Path | None
) -> AsyncIterator[KnowledgeService]:
    async with AsyncExitStack() as stack:
        chat: ChatEndpoint | None = None
        if name == "double":
            double = KnowledgeChatDouble(hosted_double.answer)
            url = stack.enter_context(serve_in_thread(double.app()))
            chat = ChatEndpoint(f"{url}/v1", "hosted-double", "hosted-double")
        elif name.startswith("local:"):
            local = settings.model_copy(update={"llm_local": True, "llm_local_model": gguf})
            chat = await open_chat(local, stack)
        service = KnowledgeService(settings, pool, chat)
        await service.start()
        stack.push_async_callback(service.stop)
        yield service


async def answer_all(
    service: KnowledgeService, questions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for question in questions:
        started = time.perf_counter()
        result: SearchResult = await service.retrieval.search(
            TENANT,
            question["question"],
            top_k=TOP_K,
            filters=Filters(),
            retrievers=("dense", "lexical"),
            answer=True,
        )
        seconds = time.perf_counter() - started
        answer = result.answer
        assert answer is not None
        passages = [h.text for h in result.hits]
        row: dict[str, Any] = {
            "id": question["id"],
            "seconds": round(seconds, 2),
            "mode": answer.mode,
            "text": answer.text,
            "note": answer.note,
            "correct": correct(question, answer.text, answer.mode),
            "contradicts": contradicts(question, answer.text, answer.mode, passages),
            "unsupported": unsupported(question, answer.text, answer.mode, passages),
            "page_in_hits": any(
                h.provenance.uri.endswith(f"/{question['page']}.html") for h in result.hits
            ),
        }
        llm_text = answer.rejected if answer.rejected is not None else answer.text
        if answer.mode == "llm" or answer.rejected is not None:
            row["llm_text"] = llm_text
            row["llm_correct"] = correct(question, llm_text, "llm")
            row["llm_contradicts"] = contradicts(question, llm_text, "llm", passages)
            row["llm_unsupported"] = unsupported(question, llm_text, "llm", passages)
        rows.append(row)
        print(
            f"  {question['id']:>3} {'ok ' if row['correct'] else 'no '}"
            f"{'CONTRADICTS ' if row['contradicts'] else ''}{answer.mode:<10} {seconds:5.1f}s "
            f"{(answer.note or answer.text)[:90]!r}",
            flush=True,
        )
    return rows


def _reason(note: str) -> str:
    """The kind of problem a note names, without its particulars."""
    reason = note.removeprefix("The LLM's answer was withheld because ")
    return re.split(r"[:(\[']| \d", reason, maxsplit=1)[0].strip().rstrip(",")


def summary(rows: list[dict[str, Any]], llm: bool) -> dict[str, Any]:
    count = len(rows)
    seconds = sorted(r["seconds"] for r in rows)
    result: dict[str, Any] = {
        "questions": count,
        "accuracy": round(sum(r["correct"] for r in rows) / count, 3),
        "contradicting_returned": sum(r["contradicts"] for r in rows),
        "page_in_hits": round(sum(r["page_in_hits"] for r in rows) / count, 3),
        "seconds_per_answer": round(sum(seconds) / count, 2),
        "seconds_median": seconds[count // 2],
    }
    result["accuracy_per_second"] = round(result["accuracy"] / result["seconds_per_answer"], 4)
    if llm:
        withheld = [r for r in rows if r["note"]]
        reasons = Counter(_reason(r["note"]) for r in withheld)
        result |= {
            "llm_accuracy_before_check": round(sum(r["llm_correct"] for r in rows) / count, 3),
            "llm_contradicting_before_check": sum(r["llm_contradicts"] for r in rows),
            "llm_answers_returned": count - len(withheld),
            "withheld": len(withheld),
            "withheld_reasons": dict(reasons.most_common()),
            "unsupported_returned": sum(r["unsupported"] for r in rows),
            "llm_unsupported_before_check": sum(r["llm_unsupported"] for r in rows),
        }
        result["contradicting_before_check_rate"] = round(
            result["llm_contradicting_before_check"] / count, 3
        )
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus = json.loads(QUESTIONS.read_text())
    questions = corpus["questions"][: args.limit] if args.limit else corpus["questions"]
    answerers: list[tuple[str, Path | None]] = [("extractive", None), ("double", None)]
    if args.local:
        answerers.append(("local:packaged", None))
    for spec in args.local_gguf:
        name, path = spec.split("=", 1)
        answerers.append((f"local:{name}", Path(path)))
    root = Path(tempfile.mkdtemp(prefix="bench-answers-"))
    server = EmbeddedPostgres(root)
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "answerers": {},
    }
    try:
        pool = await connect(server.start(), size=4)
        settings = Settings(
            data_dir=root,
            ingest_allow_private=["127.0.0.1"],
            ingest_host_interval_seconds=0,
            llm_local_max_tokens=args.max_tokens,
        )
        try:
            async with answerer("extractive", settings, pool, None) as service:
                print("ingesting", flush=True)
                report["corpus"] = await ingest(service, corpus)
            for name, gguf in answerers:
                print(name, flush=True)
                asked = questions[:: args.local_every] if name.startswith("local:") else questions
                async with answerer(name, settings, pool, gguf) as service:
                    rows = await answer_all(service, asked)
                report["answerers"][name] = {
                    "summary": summary(rows, llm=name != "extractive"),
                    "answers": rows,
                }
                write(report, args.output)  # each answerer's figures as soon as they are in
        finally:
            await pool.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return report


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Answer benchmark",
        "",
        f"{report['corpus']['pages']} pages of SQLite's and git's documentation (Debian "
        "sqlite3-doc, git-doc), "
        f"{next(iter(report['answerers'].values()))['summary']['questions']} questions with "
        "known answers (questions.json); `hybrid_retrieve`'s path with top_k 5. "
        f"{report['machine']['cpus']} shared cores. Written by bench/answers/run.py.",
        "",
        "| answerer | questions | accuracy | extractive's on them | contradicting (returned) | "
        "unsupported (returned) | LLM's own accuracy | LLM's own contradicting | "
        "LLM's own unsupported | withheld by the check | s/answer | accuracy/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    extractive = {r["id"]: r["correct"] for r in report["answerers"]["extractive"]["answers"]}
    for name, data in report["answerers"].items():
        s = data["summary"]
        llm = "llm_accuracy_before_check" in s
        baseline = sum(extractive[r["id"]] for r in data["answers"]) / len(data["answers"])
        lines.append(
            f"| {name} | {s['questions']} | {s['accuracy']:.3f} | {baseline:.3f} | "
            f"{s['contradicting_returned']} | "
            f"{s['unsupported_returned'] if llm else '-'} | "
            f"{s['llm_accuracy_before_check'] if llm else '-'} | "
            f"{s['llm_contradicting_before_check'] if llm else '-'} | "
            f"{s['llm_unsupported_before_check'] if llm else '-'} | "
            f"{s['withheld'] if llm else '-'} | {s['seconds_per_answer']} | "
            f"{s['accuracy_per_second']} |"
        )
    lines += ["", "Why the check withheld LLM answers:", ""]
    for name, data in report["answerers"].items():
        reasons = data["summary"].get("withheld_reasons")
        if reasons:
            listed = "; ".join(f"{k}: {v}" for k, v in reasons.items())
            lines.append(f"- {name}: {listed}")
    return "\n".join(lines) + "\n"


def write(report: dict[str, Any], output: str) -> None:
    (HERE / f"{output}.json").write_text(json.dumps(report, indent=1) + "\n")
    (HERE / f"{output}.md").write_text(markdown(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", action="store_true", help="also the packaged local model")
    parser.add_argument("--local-gguf", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap of a local reply")
    parser.add_argument(
        "--local-every", type=int, default=1, help="local models: every Nth question only"
    )
    parser.add_argument("--output", default="results", help="writes NAME.{json,md} here")
    args = parser.parse_args()
    print(markdown(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
