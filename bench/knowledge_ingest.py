"""Ingestion throughput (issue 9, point 22): the product's pipeline against the raw embedder.

    .venv/bin/python bench/knowledge_ingest.py                   # ~13 minutes
    .venv/bin/python bench/knowledge_ingest.py --quick           # ~4 minutes
    .venv/bin/python bench/knowledge_ingest.py --only pdf-600    # ~7 minutes: section 4 alone

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
4. A 600-page PDF (issue 9, point 7): the same kind of text PDF cut to 60 and to 600 pages
   (6 and 60 with --quick), each read by `PdfReader` page by page and ingested end to end
   through `ingest_pdf`, each in a fresh process: pages/s, the growth of the peak resident
   memory (VmHWM) and the peak of Python's allocations (tracemalloc), 600 against 60 pages.
   `--only pdf-600` runs this section alone and keeps the other sections' figures.

Results: bench/results/knowledge-ingest.{json,md}.
"""

import argparse
import asyncio
import base64
import gc
import html
import io
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
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
from agentic_rag.knowledge.results import CrawlRequest, IngestSummary
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
    chunker = service.active.chunker
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
        await store.write_document("parts", source, document, found, v, service.active.space)
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


# -- 4. a 600-page PDF ----------------------------------------------------------------------------


def long_pdfs(directory: Path, sizes: tuple[int, ...]) -> dict[int, Path]:
    """Text PDFs of `sizes` pages, written to `directory`: the first pages of one PDF made
    from distinct man pages, so that the shorter is the start of the longer; and its first 2
    pages as `warm-up.pdf`."""
    import pypdfium2 as pdfium

    pages = [p for p in corpus.pages(1000) if 2000 <= len(p.markdown) <= 8000]
    whole = pdfium.PdfDocument(text_pdf(pages))
    if len(whole) < max(sizes):
        raise SystemExit(f"the man pages make only {len(whole)} PDF pages")
    (directory / "warm-up.pdf").write_bytes(_first_pages(whole, 2))
    paths = {}
    for size in sizes:
        paths[size] = directory / f"manual-{size}.pdf"
        paths[size].write_bytes(_first_pages(whole, size))
    return paths


def _first_pages(pdf: Any, count: int) -> bytes:
    import pypdfium2 as pdfium

    part = pdfium.PdfDocument.new()
    part.import_pages(pdf, list(range(count)))
    buffer = io.BytesIO()
    part.save(buffer)
    return buffer.getvalue()


def _memory_kb() -> tuple[int, int]:
    """(resident, peak resident) memory of this process in kB; the peak since `_reset_peak`."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])


def _reset_peak() -> None:
    """Restart the peak resident memory (VmHWM) from the current one (Linux 4.0 and later)."""
    Path("/proc/self/clear_refs").write_text("5")


class Measured:
    """Time and memory growth of what runs inside: the peak resident memory over the resident
    memory before, and the peak of Python's own allocations (tracemalloc, which slows Python
    code and leaves C code alone: the embedder, PDFium, the tokenizer)."""

    figures: dict[str, float]

    def __enter__(self) -> "Measured":
        gc.collect()
        _reset_peak()
        self._before, _ = _memory_kb()
        tracemalloc.start()
        self._started = time.perf_counter()
        return self

    def peak_growth_mb(self) -> float:
        """The peak resident memory's growth so far."""
        return round((_memory_kb()[1] - self._before) / 1024, 1)

    def __exit__(self, *exc: object) -> None:
        seconds = time.perf_counter() - self._started
        python_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        after, peak = _memory_kb()
        self.figures = {
            "seconds": round(seconds, 3),
            "rss_before_mb": round(self._before / 1024, 1),
            "rss_peak_growth_mb": round((peak - self._before) / 1024, 1),
            "rss_after_growth_mb": round((after - self._before) / 1024, 1),
            "python_peak_mb": round(python_peak / 2**20, 1),
        }


def read_child(path: Path) -> dict[str, Any]:
    """In a fresh process: `PdfReader` over the PDF's bytes, page by page, keeping nothing."""
    from agentic_rag.knowledge.sources.pdf import PdfReader

    with PdfReader(path.parent / "warm-up.pdf") as warm:  # loads PDFium and the fonts
        list(warm.pages())
    data = path.read_bytes()
    pages = chars = 0
    with Measured() as measured, PdfReader(data, name=path.name) as reader:
        for page in reader.pages():
            pages, chars = pages + 1, chars + len(page.text)
    return {"pages": pages, "text_chars": chars, **measured.figures}


async def ingest_child(path: Path, dsn: str) -> dict[str, Any]:
    """In a fresh process: the PDF through `KnowledgeService.ingest_pdf`, end to end, with the
    peak memory's growth when the last page is read and when the last chunk is embedded. Warmed
    up first (a 2-page PDF, then a full batch of chunks at the embedder's limit), so that ONNX
    Runtime's memory has its working size before the measurement."""
    data = await asyncio.to_thread(path.read_bytes)
    warm_up = await asyncio.to_thread((path.parent / "warm-up.pdf").read_bytes)
    root = Path(tempfile.mkdtemp(prefix="knowledge-pdf-"))
    pool = await connect(dsn, size=4)
    service = KnowledgeService(Settings(data_dir=root), pool)
    await service.start()
    tenant = f"{path.stem}-{new_id()}"
    pages: list[str] = []
    measured: Measured | None = None
    stages: dict[str, float] = {}

    async def report(message: str) -> None:
        if ": page " in message:
            pages.append(message)
        last_page = re.search(r": page (\d+) of \1$", message)
        last_chunk = re.search(r": embedded (\d+) of \1 chunks$", message)
        if measured is not None and (last_page or last_chunk):
            stages["read" if last_page else "embedded"] = measured.peak_growth_mb()

    async def ingest(pdf: bytes, name: str) -> IngestSummary:
        return await service.ingest_pdf(
            tenant,
            new_id(),
            report,
            data=base64.b64encode(pdf).decode(),
            url=None,
            path=None,
            filename=name,
            metadata={},
        )

    try:
        await ingest(warm_up, "warm-up.pdf")
        await service.embedder.embed(["words " * 300] * EMBED_BATCH)
        pages.clear()
        with Measured() as measured:
            summary = await ingest(data, path.name)
    finally:
        await service.stop()
        await pool.close()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "progress_pages": len(pages),
        "chunks": summary.chunks,
        "rss_peak_growth_at_mb": stages,
        **measured.figures,
    }


def _child(mode: str, path: Path, dsn: str = "") -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--pdf", str(path), "--dsn", dsn]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {path.name} failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


def long_pdf(sizes: tuple[int, ...]) -> dict[str, Any]:
    """Each size read, then ingested, each in a fresh process, on one embedded PostgreSQL."""
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    started = time.time()
    directory = Path(tempfile.mkdtemp(prefix="knowledge-long-pdf-"))
    server = EmbeddedPostgres(directory / "postgres")
    try:
        paths = long_pdfs(directory, sizes)
        dsn = server.start()
        runs = []
        for size, path in paths.items():
            read = _child("read", path)
            print(f"  read {size} pages in {read['seconds']} s", flush=True)
            ingest = _child("ingest", path, dsn)
            print(f"  ingested {size} pages in {ingest['seconds']} s", flush=True)
            runs.append(
                {"pages": size, "pdf_bytes": path.stat().st_size, "read": read, "ingest": ingest}
            )
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        "load_average": load,
        "runs": runs,
    }


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
    if "long_pdf" in r:
        lines += ["", *render_long_pdf(r["long_pdf"])]
    findings = RESULTS / "knowledge-ingest-findings.md"
    if findings.exists():
        lines += ["", findings.read_text().strip()]
    return "\n".join(lines) + "\n"


def render_long_pdf(r: dict[str, Any]) -> list[str]:
    small, large = r["runs"]
    lines = [
        f"## A {large['pages']}-page PDF: page by page, bounded memory (issue 9, point 7)",
        "",
        f"Run {r['date']} UTC, load average before {r['load_average']}. The same kind of text "
        f"PDF as above (man pages through reportlab), cut to {small['pages']} and "
        f"{large['pages']} pages (the shorter is the start of the longer). Each figure comes "
        "from a fresh process, warmed up first (PDFium; for ingestion also a 2-page PDF and a "
        "full batch of the embedder). *Read*: `PdfReader` over the PDF's bytes, page by page, "
        "keeping nothing. *Ingest*: `KnowledgeService.ingest_pdf` end to end (progress per "
        "page, chunk, embed, store in one transaction). Memory: the growth of the peak resident "
        "memory over the resident memory before (VmHWM, restarted through "
        "`/proc/self/clear_refs`), and the peak of Python's allocations (tracemalloc, on during "
        "the measurement: the seconds include its cost).",
        "",
        _row(
            "",
            "pages",
            "PDF bytes",
            "text chars",
            "chunks",
            "seconds",
            "pages/s",
            "peak RSS growth MB",
            "Python peak MB",
        ),
        _row(*["---"] * 9),
    ]
    for mode in ("read", "ingest"):
        for run in (small, large):
            x = run[mode]
            lines.append(
                _row(
                    mode,
                    run["pages"],
                    run["pdf_bytes"],
                    run["read"]["text_chars"],
                    x.get("chunks", ""),
                    x["seconds"],
                    f"**{round(run['pages'] / x['seconds'], 1)}**",
                    x["rss_peak_growth_mb"],
                    x["python_peak_mb"],
                )
            )
        a, b = small[mode], large[mode]
        lines.append(
            _row(
                f"{mode}: {large['pages']} / {small['pages']} pages",
                f"{large['pages'] / small['pages']:g}",
                f"{large['pdf_bytes'] / small['pdf_bytes']:.1f}",
                f"{large['read']['text_chars'] / small['read']['text_chars']:.1f}",
                f"{b['chunks'] / a['chunks']:.1f}" if "chunks" in a else "",
                "",
                "",
                _ratio(b["rss_peak_growth_mb"], a["rss_peak_growth_mb"]),
                _ratio(b["python_peak_mb"], a["python_peak_mb"]),
            )
        )
    progress = [run["ingest"]["progress_pages"] for run in (small, large)]
    lines += [
        "",
        f'Progress events "page N of M" during ingestion: {progress[0]} and {progress[1]}. '
        "Peak RSS growth (MB) during ingestion once the last page was read, once the last "
        "chunk was embedded, and at the end: "
        + "; ".join(
            f"{run['pages']} pages: {run['ingest']['rss_peak_growth_at_mb'].get('read', '-')}, "
            f"{run['ingest']['rss_peak_growth_at_mb'].get('embedded', '-')}, "
            f"{run['ingest']['rss_peak_growth_mb']}"
            for run in (small, large)
        )
        + ".",
    ]
    return lines


def _ratio(large: float, small: float) -> str:
    return f"{large / small:.1f}" if small > 0 else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        choices=["pdf-600"],
        help="run only this section; the other sections' figures are kept from the .json",
    )
    parser.add_argument("--output", default="knowledge-ingest")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    # One measurement of the 600-page section, run by this script in a fresh process.
    parser.add_argument("--child", choices=["read", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--pdf", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = (
            read_child(args.pdf)
            if args.child == "read"
            else asyncio.run(ingest_child(args.pdf, args.dsn))
        )
        print(json.dumps(figures))
        return
    saved_path = RESULTS / f"{args.output}.json"
    if args.render:
        (RESULTS / f"{args.output}.md").write_text(render(json.loads(saved_path.read_text())))
        return
    long_sizes = (6, 60) if args.quick else (60, 600)
    if args.only == "pdf-600":
        result = json.loads(saved_path.read_text())
        print("a 600-page PDF", flush=True)
        result["long_pdf"] = long_pdf(long_sizes)
    else:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        started = time.time()
        result = asyncio.run(run(args.quick))
        print("a 600-page PDF", flush=True)
        result["long_pdf"] = long_pdf(long_sizes)
        result.update(
            date=time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            load_average=load,
            seconds=round(time.time() - started),
            machine=f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
            quick=args.quick,
        )
    saved_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    (RESULTS / f"{args.output}.md").write_text(render(result))
    print(render(result))


if __name__ == "__main__":
    main()
