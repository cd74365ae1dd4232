"""Ingestion throughput (issue 9, point 22): the product's pipeline against the raw embedder.

    .venv/bin/python bench/knowledge_ingest.py           # ~6 minutes
    .venv/bin/python bench/knowledge_ingest.py --quick   # ~2 minutes

1. Pipeline overhead. The same man pages (real text) go through `KnowledgeService.ingest_text`
   (a job per page: chunk, embed, store in one transaction) and, in the same process, their
   chunks' texts (exactly what the pipeline embeds, `embedding_text(chunk)`, in the same calls of
   at most 128 texts) through `LocalEmbedder.embed` alone. Rounds alternate which goes first;
   overhead = median pipeline time / median raw time - 1 (target: at most 10%). Then the
   pipeline's other parts are timed alone: chunking, `write_document`, the job's bookkeeping.
2. HTML: a site of man pages with realistic layout (navigation, sidebar, footer, scripts),
   served by this script on 127.0.0.1, crawled through `KnowledgeService.ingest_url` (SSRF guard
   allowing 127.0.0.1, per-host interval 0): pages/s.
3. PDF: text PDFs made with reportlab (wrapped paragraphs, headings) through `ingest_pdf`:
   pages/s; and a few scanned pages (the same pages rasterised at 150 dpi, no text layer), which
   go through OCR: pages/s, reported separately.

Results: bench/results/knowledge-ingest.{json,md}.
"""

import argparse
import asyncio
import base64
import html
import io
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import knowledge_corpus as corpus

from agentic_rag.config import Settings
from agentic_rag.ids import new_id
from agentic_rag.knowledge.chunking import embedding_text
from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.ingestion import EMBED_BATCH
from agentic_rag.knowledge.results import CrawlRequest
from agentic_rag.knowledge.service import KnowledgeService
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.postgres import connect

RESULTS = Path(__file__).resolve().parent / "results"


async def quiet(_: str) -> None:
    """Progress reports go nowhere (a client that listens costs the same)."""


# -- 1. pipeline against raw embedder -----------------------------------------------------------


async def overhead(
    service: KnowledgeService, pages: list[corpus.Page], rounds: int
) -> dict[str, Any]:
    chunker = service.ingestion._chunker
    embedder = service.embedder
    per_page = [
        [embedding_text(c) for c in chunker.chunk(markdown_sections(p.markdown))] for p in pages
    ]
    chunks = sum(len(t) for t in per_page)
    tokens = sum(embedder.count_tokens(t) for texts in per_page for t in texts)

    async def raw() -> float:
        started = time.perf_counter()
        for texts in per_page:
            for s in range(0, len(texts), EMBED_BATCH):
                await embedder.embed(texts[s : s + EMBED_BATCH])
        return time.perf_counter() - started

    async def pipeline(tenant: str) -> float:
        started = time.perf_counter()
        for page in pages:
            summary = await service.ingest_text(
                tenant, new_id(), quiet, text=page.markdown, title=page.name, metadata={}
            )
            assert summary.ingested == 1, summary
        return time.perf_counter() - started

    await raw()  # warm-up: model pages, thread pool
    raw_times, pipe_times = [], []
    for r in range(rounds):
        if r % 2 == 0:
            raw_times.append(await raw())
            pipe_times.append(await pipeline(f"round{r}"))
        else:
            pipe_times.append(await pipeline(f"round{r}"))
            raw_times.append(await raw())
        print(
            f"  round {r}: raw {raw_times[-1]:.2f} s, pipeline {pipe_times[-1]:.2f} s", flush=True
        )
    raw_m, pipe_m = statistics.median(raw_times), statistics.median(pipe_times)

    # The other parts of the pipeline, alone.
    started = time.perf_counter()
    for page in pages:
        await asyncio.to_thread(chunker.chunk, markdown_sections(page.markdown))
    chunk_seconds = time.perf_counter() - started
    vectors = [await embedder.embed(t) for t in per_page]
    store = service.store
    write_seconds = 0.0
    for page, v in zip(pages, vectors, strict=True):
        sections = markdown_sections(page.markdown)
        document = ExtractedDocument(
            uri=page.name, title=page.name, mime_type="text/markdown", sections=sections
        )
        found = chunker.chunk(sections)
        source = await store.upsert_source("parts", "text", page.name, page.name, {})
        started = time.perf_counter()
        await store.write_document("parts", source, document, found, v, service.space)
        write_seconds += time.perf_counter() - started
    return {
        "pages": len(pages),
        "chunks": chunks,
        "tokens": tokens,
        "rounds": rounds,
        "raw_seconds": [round(t, 3) for t in raw_times],
        "pipeline_seconds": [round(t, 3) for t in pipe_times],
        "raw_median_seconds": round(raw_m, 3),
        "pipeline_median_seconds": round(pipe_m, 3),
        "raw_chunks_per_second": round(chunks / raw_m, 1),
        "pipeline_chunks_per_second": round(chunks / pipe_m, 1),
        "overhead": round(pipe_m / raw_m - 1, 4),
        "overhead_per_round_median": round(
            statistics.median(p / r - 1 for p, r in zip(pipe_times, raw_times, strict=True)), 4
        ),
        "parts_alone_seconds": {
            "chunking": round(chunk_seconds, 3),
            "write_document": round(write_seconds, 3),
            "rest (jobs, sources, lookups)": round(
                pipe_m - raw_m - chunk_seconds - write_seconds, 3
            ),
        },
    }


# -- 2. HTML ------------------------------------------------------------------------------------

_STYLE = "body{font-family:sans-serif;margin:0}nav a{margin:0 1em}aside{float:right;width:20%}" * 20
_SCRIPT = "window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}" * 10


def html_page(page: corpus.Page, index: int, total: int, rng: random.Random) -> str:
    body = []
    for line in page.markdown.splitlines():
        if line.startswith("### "):
            body.append(f"<h3>{html.escape(line[4:])}</h3>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    related = "".join(
        f'<li><a href="/p/{j}">page {j}</a></li>' for j in rng.sample(range(total), 5)
    )
    menu = "".join(f'<a href="/section/{s}">Section {s}</a>' for s in range(1, 9))
    previous, following = (index - 1) % total, (index + 1) % total
    neighbours = f'<a href="/p/{previous}">previous</a> <a href="/p/{following}">next</a>'
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(page.name)} - "
        f"Manual</title><style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>"
        f'<header><a href="/">Manual</a><nav>{menu}</nav><form><input name=q></form></header>'
        f"<aside><h4>Related</h4><ul>{related}</ul></aside>"
        f"<main><article>{''.join(body)}</article><div class=pager>{neighbours}</div></main>"
        "<footer><p>Copyright the authors. Licensed under the terms of each page.</p>"
        '<a href="/about">About</a> <a href="/privacy">Privacy</a></footer></body></html>'
    )


class Site:
    def __init__(self, pages: list[corpus.Page]) -> None:
        rng = random.Random(5)
        self.pages = {
            f"/p/{i}": html_page(p, i, len(pages), rng).encode() for i, p in enumerate(pages)
        }
        links = "".join(
            f'<li><a href="/p/{i}">{html.escape(p.name)}</a></li>' for i, p in enumerate(pages)
        )
        self.pages["/"] = (
            "<!doctype html><html><head><title>Manual</title></head><body><h1>Manual pages"
            "</h1><p>The manual pages of this machine, one per link below.</p>"
            f"<ul>{links}</ul></body></html>"
        ).encode()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/robots.txt":
                    body, kind = b"User-agent: *\nAllow: /\n", "text/plain"
                elif self.path in site.pages:
                    body, kind = site.pages[self.path], "text/html; charset=utf-8"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def crawl(service: KnowledgeService, pages: list[corpus.Page], rounds: int) -> dict[str, Any]:
    site = Site(pages)
    try:
        times, summaries = [], []
        for r in range(rounds):
            started = time.perf_counter()
            summary = await service.ingest_url(
                f"crawl{r}",
                new_id(),
                quiet,
                CrawlRequest(url=site.url, depth=1, max_pages=len(pages) + 1),
            )
            times.append(time.perf_counter() - started)
            summaries.append(summary)
            print(
                f"  crawl {r}: {summary.ingested} ingested, {len(summary.skipped)} skipped "
                f"in {times[-1]:.1f} s",
                flush=True,
            )
        t = statistics.median(times)
        s = summaries[0]
        return {
            "pages_served": len(site.pages) - 1,
            "ingested": s.ingested,
            "skipped": [o.model_dump() for o in s.skipped][:5],
            "chunks": s.chunks,
            "seconds": [round(x, 2) for x in times],
            "pages_per_second": round((s.ingested + len(s.skipped)) / t, 2),
            "chunks_per_second": round(s.chunks / t, 1),
            "html_bytes_mean": round(statistics.fmean(len(b) for b in site.pages.values())),
        }
    finally:
        site.close()


# -- 3. PDF -------------------------------------------------------------------------------------


def text_pdf(pages: list[corpus.Page]) -> bytes:
    from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
    from reportlab.lib.styles import getSampleStyleSheet  # type: ignore[import-untyped]
    from reportlab.platypus import Paragraph, SimpleDocTemplate  # type: ignore[import-untyped]

    styles = getSampleStyleSheet()
    story = []
    for page in pages:
        for line in page.markdown.splitlines():
            if not line.strip():
                continue
            style = (
                styles["Heading1"]
                if line.startswith("# ")
                else styles["Heading2"]
                if line.startswith("#")
                else styles["BodyText"]
            )
            story.append(Paragraph(html.escape(line.lstrip("# ")), style))
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4, title="Manual").build(story)
    return buffer.getvalue()


def scanned(pdf: bytes, count: int) -> bytes:
    """The first `count` pages of `pdf` as 150 dpi greyscale images, without a text layer."""
    import pypdfium2 as pdfium  # type: ignore[import-untyped]

    document = pdfium.PdfDocument(pdf)
    images = [document[i].render(scale=150 / 72).to_pil().convert("L") for i in range(count)]
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", resolution=150, save_all=True, append_images=images[1:])
    return buffer.getvalue()


async def pdfs(service: KnowledgeService, pages: list[corpus.Page], scans: int) -> dict[str, Any]:
    import pypdfium2 as pdfium  # type: ignore[import-untyped]

    made = text_pdf(pages)
    count = len(pdfium.PdfDocument(made))
    result: dict[str, Any] = {}
    for name, data, n in (("text", made, count), ("scanned", scanned(made, scans), scans)):
        started = time.perf_counter()
        summary = await service.ingest_pdf(
            f"pdf-{name}",
            new_id(),
            quiet,
            data=base64.b64encode(data).decode(),
            url=None,
            path=None,
            filename=f"{name}.pdf",
            metadata={},
        )
        seconds = time.perf_counter() - started
        result[name] = {
            "pages": n,
            "bytes": len(data),
            "chunks": summary.chunks,
            "seconds": round(seconds, 2),
            "pages_per_second": round(n / seconds, 2),
            "notes": summary.notes,
        }
        print(f"  pdf {name}: {n} pages in {seconds:.1f} s", flush=True)
    return result


# -- the run ------------------------------------------------------------------------------------


async def run(quick: bool) -> dict[str, Any]:
    # Pages of 2-8 kB of text (3-8 chunks each): a mix like a documentation site's.
    pages = [p for p in corpus.pages(600) if 2000 <= len(p.markdown) <= 8000]
    random.Random(3).shuffle(pages)
    root = Path(tempfile.mkdtemp(prefix="knowledge-ingest-"))
    server = EmbeddedPostgres(root)
    try:
        dsn = server.start()
        pool = await connect(dsn, size=4)
        settings = Settings(
            data_dir=root,
            ingest_allow_private=["127.0.0.1"],
            ingest_host_interval_seconds=0,
        )
        service = KnowledgeService(settings, pool)
        await service.start()
        try:
            result: dict[str, Any] = {}
            print("pipeline against the raw embedder", flush=True)
            result["overhead"] = await overhead(
                service, pages[: 4 if quick else 10], 3 if quick else 5
            )
            print("HTML crawl", flush=True)
            result["html"] = await crawl(service, pages[20 : 28 if quick else 44], 1)
            print("PDF", flush=True)
            result["pdf"] = await pdfs(service, pages[50 : 53 if quick else 60], 1 if quick else 3)
        finally:
            await service.stop()
            await pool.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return result


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render(r: dict[str, Any]) -> str:
    o, h, p = r["overhead"], r["html"], r["pdf"]
    verdict = "PASS" if o["overhead"] <= 0.10 else "FAIL"
    lines = [
        "# Ingestion throughput (issue 9, point 22)",
        "",
        f"`bench/knowledge_ingest.py`, run {r['date']} UTC on {r['machine']}, load average "
        f"before {r['load_average']} (other benchmarks share these cores). Real text: Debian "
        "man pages of this machine. One process: the product's KnowledgeService, LocalEmbedder "
        "(all-MiniLM-L6-v2 int8 ONNX) and embedded PostgreSQL.",
        "",
        "## Pipeline against the raw embedder",
        "",
        f"**Target: pipeline overhead at most 10%: {verdict}**, measured "
        f"{o['overhead'] * 100:.1f}% (median pipeline {o['pipeline_median_seconds']} s, median "
        f"raw {o['raw_median_seconds']} s; median of the per-round ratios "
        f"{o['overhead_per_round_median'] * 100:.1f}%).",
        "",
        f"{o['pages']} pages, {o['chunks']} chunks, {o['tokens']} tokens, {o['rounds']} "
        "interleaved rounds.",
        "",
        _row("", "median s", "chunks/s", "every round (s)"),
        _row(*["---"] * 4),
        _row(
            "raw `LocalEmbedder.embed` (same texts, same calls)",
            o["raw_median_seconds"],
            o["raw_chunks_per_second"],
            o["raw_seconds"],
        ),
        _row(
            "pipeline `ingest_text` (chunk, embed, store, job)",
            o["pipeline_median_seconds"],
            o["pipeline_chunks_per_second"],
            o["pipeline_seconds"],
        ),
        "",
        f"The other parts, timed alone over the same pages (s): {o['parts_alone_seconds']}.",
        "",
        "## HTML",
        "",
        f"{h['pages_served']} pages (mean {h['html_bytes_mean']} bytes of HTML) and the index "
        "page, served on 127.0.0.1, crawled with `ingest_url` (depth 1, per-host interval 0): "
        f"{h['ingested']} ingested, {h['chunks']} chunks in {h['seconds']} s: "
        f"**{h['pages_per_second']} pages/s** ({h['chunks_per_second']} chunks/s). "
        f"Skipped: {h['skipped'] or 'none'}.",
        "",
        "## PDF",
        "",
        _row("kind", "pages", "chunks", "seconds", "pages/s"),
        _row(*["---"] * 5),
    ]
    for name, x in p.items():
        lines.append(
            _row(name, x["pages"], x["chunks"], x["seconds"], f"**{x['pages_per_second']}**")
        )
    lines += [
        "",
        "Scanned: the text PDF's first pages rasterised at 150 dpi (greyscale, no text layer), "
        "read by rapidocr.",
    ]
    findings = RESULTS / "knowledge-ingest-findings.md"
    if findings.exists():
        lines += ["", findings.read_text().strip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default="knowledge-ingest")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = parser.parse_args()
    if args.render:
        saved = json.loads((RESULTS / f"{args.output}.json").read_text())
        (RESULTS / f"{args.output}.md").write_text(render(saved))
        return
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    started = time.time()
    result = asyncio.run(run(args.quick))
    result.update(
        date=time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        load_average=load,
        seconds=round(time.time() - started),
        machine=f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        quick=args.quick,
    )
    (RESULTS / f"{args.output}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (RESULTS / f"{args.output}.md").write_text(render(result))
    print(render(result))


if __name__ == "__main__":
    main()
