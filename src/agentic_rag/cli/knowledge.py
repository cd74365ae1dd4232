"""The knowledge commands of the CLI: `agentic-rag ingest | query | sources [SOURCE] | reembed`.

`ingest`, `query` and `sources` call the skills (agentic_rag.cli.skill_client), on a running
server (--url, or the one that holds the data directory) or on the local data directory;
`reembed` works on the database itself, beside the servers that search it.
"""

import base64
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from agentic_rag.cli.skill_client import SkillCallError, Skills
from agentic_rag.cli.skill_commands import progress_bar
from agentic_rag.config import Settings

_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_YOUTUBE = re.compile(r"(?:https?://)?(?:www\.|m\.)?(?:youtube\.com|youtu\.be)/\S+", re.IGNORECASE)
TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".text", ""}
# Documents `sources SOURCE_ID` lists (the list_documents skill's most).
DOCUMENTS_LISTED = 1000


def ingestion_call(target: str, *, depth: int, max_pages: int) -> tuple[str, dict[str, Any]]:
    """The skill and arguments that ingest `target`: a URL, a video, a PDF or a text file."""
    if _YOUTUBE.fullmatch(target):
        return "ingest_youtube", {"video_url": target}
    if _URL.fullmatch(target):
        return "ingest_url", {"url": target, "depth": depth, "max_pages": max_pages}
    path = Path(target)
    if not path.is_file():
        raise SkillCallError(f"{target}: no such file, and not an http(s) URL")
    if path.suffix.lower() == ".pdf":
        data = base64.b64encode(path.read_bytes()).decode()
        return "ingest_pdf", {"data": data, "filename": path.name}
    if path.suffix.lower() not in TEXT_SUFFIXES:
        raise SkillCallError(f"{target}: only PDFs and text or markdown files can be ingested")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SkillCallError(f"{target}: not UTF-8 text") from None
    return "ingest_text", {"text": text, "title": path.name}


async def ingest(
    skills: Skills, targets: list[str], *, depth: int, max_pages: int, out: TextIO = sys.stdout
) -> int:
    failures = 0
    for target in targets:
        try:
            skill, arguments = ingestion_call(target, depth=depth, max_pages=max_pages)
            with progress_bar(target) as advance:
                _, text = await skills.call(skill, arguments, advance)
            print(text, file=out)
        except SkillCallError as exc:
            failures += 1
            print(f"agentic-rag ingest: {exc}", file=sys.stderr)
    return 1 if failures else 0


async def query(
    skills: Skills, question: str, *, top_k: int, reranker: str | None, out: TextIO = sys.stdout
) -> int:
    arguments: dict[str, Any] = {"query": question, "top_k": top_k}
    if reranker:
        arguments["reranker"] = reranker
    try:
        _, text = await skills.call("hybrid_retrieve", arguments, lambda _: None)
    except SkillCallError as exc:
        print(f"agentic-rag query: {exc}", file=sys.stderr)
        return 1
    print(text, file=out)
    return 0


async def sources(skills: Skills, source_id: str | None = None, *, out: TextIO = sys.stdout) -> int:
    """The sources with their counts; with `source_id`, that source's documents."""
    if source_id is not None:
        return await documents(skills, source_id, out=out)
    try:
        data, _ = await skills.call("list_sources", {}, lambda _: None)
    except SkillCallError as exc:
        print(f"agentic-rag sources: {exc}", file=sys.stderr)
        return 1
    if not data["sources"]:
        print("no sources yet: agentic-rag ingest URL|FILE adds some", file=out)
    for source in data["sources"]:
        title = source["title"] if source["title"] not in ("", source["uri"]) else None
        print(
            f"{source['source_id']}  {source['kind']:<8} {source['documents']:>5} docs "
            f"{source['chunks']:>7} chunks  " + (f"{title}  " if title else "") + source["uri"],
            file=out,
        )
    return 0


async def documents(skills: Skills, source_id: str, *, out: TextIO = sys.stdout) -> int:
    arguments = {"source_id": source_id, "limit": DOCUMENTS_LISTED}
    try:
        data, _ = await skills.call("list_documents", arguments, lambda _: None)
    except SkillCallError as exc:
        print(f"agentic-rag sources: {exc}", file=sys.stderr)
        return 1
    for document in data["documents"]:
        print(
            f"{document['document_id']}  {document['chunks']:>5} chunks  {document['title']}  "
            f"{document['uri']}",
            file=out,
        )
    if len(data["documents"]) == DOCUMENTS_LISTED:
        print(
            f"(the first {DOCUMENTS_LISTED}; `agentic-rag call list_documents source_id="
            f"{source_id} offset:={DOCUMENTS_LISTED}` lists the next)",
            file=out,
        )
    return 0


async def reembed(settings: Settings) -> int:
    """Re-embed every chunk with the configured model, then switch searches to it."""
    from agentic_rag.knowledge.reembed import ReembedProgress
    from agentic_rag.knowledge.reembed import reembed as run
    from agentic_rag.knowledge.service import embedder_from
    from agentic_rag.knowledge.store import KnowledgeStore
    from agentic_rag.storage.database import open_database

    embedder = embedder_from(settings)
    async with open_database(settings) as pool:
        with tqdm(
            desc=f"re-embedding with {embedder.name}", unit=" chunks", file=sys.stderr
        ) as bar:

            def report(progress: ReembedProgress) -> None:
                bar.total = progress.total
                bar.n = progress.done
                bar.refresh()

            try:
                space = await run(KnowledgeStore(pool), embedder, report)
            finally:
                await embedder.aclose()
    print(f"searches now use {space.model} ({space.dimension} dimensions)")
    return 0
