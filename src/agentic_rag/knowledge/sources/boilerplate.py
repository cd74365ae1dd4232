"""Boilerplate: blocks repeated across the pages of one site, kept out of its documents.

A block is a section that is not a heading (a paragraph, list, table or code block). Its key is
a hash of its text case-folded, whitespace collapsed and every date and time of day read as
one, so that "This page last modified on 2018-11-26 12:01:01 UTC" is the same block on every
page (other numbers count: pages that differ only in them, a template's, differ).
The pages of a site (a tenant's pages on one host) that hold each block are recorded as pages
are read (table `site_blocks`). A block is boilerplate on a site once it is on at least
`MIN_PAGES` pages and on at least `MIN_SHARE` of the site's pages read so far: footers and
suite names are on nearly every page, while a sentence that a few pages share stays. Once
boilerplate (remembered in `site_boilerplate`), a block stays so while it is on at least
`KEEP_SHARE` of the pages: a site that gains pages without its template (an index reached by
another start page) must not see its footer come back, and its pages change, on every crawl. A
heading is never boilerplate itself, but one left with nothing under it goes with its blocks.
A page is never emptied: when all its blocks are repeated (pages made from one template), they
are what it says, and it keeps them.

A crawl decides with what it knows when it reads a page (the first pages of a new site cannot
know their footer yet), and at its end re-decides each page it read with the site's final
counts (`KnowledgeService._crawled`).
"""

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import httpx

from agentic_rag.knowledge.documents import ExtractedDocument, Section
from agentic_rag.knowledge.sources.html_page import HTML_TYPES
from agentic_rag.storage.pool import Pool

MIN_PAGES = 3
MIN_SHARE = 0.8
KEEP_SHARE = 0.5
_DATE_OR_TIME = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?")


def block_key(section: Section) -> bytes | None:
    """The key of `section` as a block, or None for a heading."""
    if section.kind == "heading":
        return None
    normalised = _DATE_OR_TIME.sub("0", " ".join(section.text.casefold().split()))
    return hashlib.blake2b(normalised.encode(), digest_size=16).digest()


def page_keys(sections: Iterable[Section]) -> list[bytes]:
    """The distinct block keys of a page."""
    return list(dict.fromkeys(k for s in sections if (k := block_key(s)) is not None))


@dataclass(frozen=True)
class SiteCounts:
    """How many pages of a site hold each of some blocks, and how many pages it has."""

    pages_with: dict[bytes, int]
    pages: int
    known: frozenset[bytes] = frozenset()
    """Those of the blocks found to be boilerplate before."""

    def repeated(self) -> frozenset[bytes]:
        """The blocks that are boilerplate on this site."""
        new = max(MIN_PAGES, MIN_SHARE * self.pages)
        kept = max(MIN_PAGES, KEEP_SHARE * self.pages)
        return frozenset(
            key
            for key, count in self.pages_with.items()
            if count >= new or (key in self.known and count >= kept)
        )


def without_boilerplate(
    sections: Sequence[Section], repeated: frozenset[bytes]
) -> tuple[list[Section], int]:
    """`sections` without the blocks in `repeated`, and without a heading that had content
    and has none left; with how many blocks were left out. A page all of whose blocks are
    repeated keeps them."""
    dropped = [block_key(s) in repeated for s in sections]
    blocks = [d for s, d in zip(sections, dropped, strict=True) if s.kind != "heading"]
    if not any(dropped) or all(blocks):
        return list(sections), 0
    kept: list[Section] = []
    for index, section in enumerate(sections):
        if dropped[index]:
            continue
        if section.kind == "heading" and _emptied(sections, dropped, index):
            continue
        kept.append(section)
    return kept, sum(dropped)


def _emptied(sections: Sequence[Section], dropped: list[bool], index: int) -> bool:
    """Whether the heading at `index` had blocks under it and all of them were dropped."""
    path = sections[index].heading_path
    under = []
    for later in range(index + 1, len(sections)):
        if sections[later].heading_path[: len(path)] != path:
            break
        if sections[later].kind != "heading":
            under.append(dropped[later])
    return bool(under) and all(under)


class SiteBlocks:
    """The `site_blocks` table."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def record(self, tenant: str, site: str, uri: str, keys: Sequence[bytes]) -> SiteCounts:
        """Records that page `uri` of `site` holds the blocks `keys` (and no others), and
        returns how many of the site's pages hold each of them."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM site_blocks WHERE tenant = $1 AND site = $2 AND uri = $3",
                tenant,
                site,
                uri,
            )
            await conn.execute(
                "INSERT INTO site_blocks (tenant, site, block, uri) "
                "SELECT $1, $2, block, $3 FROM unnest($4::bytea[]) AS block",
                tenant,
                site,
                uri,
                list(keys),
            )
        return await self.counts(tenant, site, keys)

    async def counts(self, tenant: str, site: str, keys: Sequence[bytes]) -> SiteCounts:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT block, count(*) AS pages FROM site_blocks "
                "WHERE tenant = $1 AND site = $2 AND block = ANY($3::bytea[]) GROUP BY block",
                tenant,
                site,
                list(keys),
            )
            pages = await conn.fetchval(
                "SELECT count(DISTINCT uri) FROM site_blocks WHERE tenant = $1 AND site = $2",
                tenant,
                site,
            )
            known = await conn.fetch(
                "SELECT block FROM site_boilerplate "
                "WHERE tenant = $1 AND site = $2 AND block = ANY($3::bytea[])",
                tenant,
                site,
                list(keys),
            )
        return SiteCounts(
            {row["block"]: row["pages"] for row in rows},
            pages or 0,
            frozenset(row["block"] for row in known),
        )

    async def decided(self, tenant: str, site: str, counts: SiteCounts) -> frozenset[bytes]:
        """The boilerplate among `counts`' blocks, remembered for the next decisions."""
        repeated = counts.repeated()
        if repeated == counts.known:
            return repeated
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO site_boilerplate (tenant, site, block) "
                "SELECT $1, $2, block FROM unnest($3::bytea[]) AS block ON CONFLICT DO NOTHING",
                tenant,
                site,
                list(repeated - counts.known),
            )
            await conn.execute(
                "DELETE FROM site_boilerplate "
                "WHERE tenant = $1 AND site = $2 AND block = ANY($3::bytea[])",
                tenant,
                site,
                list(counts.known - repeated),
            )
        return repeated


class CrawlBoilerplate[Page]:
    """Boilerplate removal over one crawl of a tenant's: each HTML page is recorded and
    filtered as it is read, and `redecided` gives the pages to store again once the crawl has
    seen the whole site, each with the `Page` (what the crawl read) it came with."""

    def __init__(self, blocks: SiteBlocks, tenant: str) -> None:
        self._blocks = blocks
        self._tenant = tenant
        self._read: dict[str, tuple[Page, ExtractedDocument, frozenset[bytes]]] = {}
        """Each page read, as extracted, with the boilerplate it was stored without."""

    async def filtered(self, document: ExtractedDocument, page: Page) -> ExtractedDocument:
        """`document` without the blocks that are boilerplate on its site so far."""
        if document.mime_type not in HTML_TYPES or not document.sections:
            return document
        keys, site = page_keys(document.sections), _site(document.uri)
        counts = await self._blocks.record(self._tenant, site, document.uri, keys)
        repeated = await self._blocks.decided(self._tenant, site, counts)
        self._read[document.uri] = (page, document, repeated)
        return _without(document, repeated)

    async def redecided(self) -> list[tuple[Page, ExtractedDocument]]:
        """The pages read whose boilerplate, decided with the site's counts now, differs from
        what they were stored without: filtered anew."""
        changed = []
        for uri, (page, document, used) in self._read.items():
            keys, site = page_keys(document.sections), _site(uri)
            counts = await self._blocks.counts(self._tenant, site, keys)
            repeated = await self._blocks.decided(self._tenant, site, counts)
            if repeated != used:
                self._read[uri] = (page, document, repeated)
                changed.append((page, _without(document, repeated)))
        return changed


def _without(document: ExtractedDocument, repeated: frozenset[bytes]) -> ExtractedDocument:
    sections, dropped = without_boilerplate(document.sections, repeated)
    if not dropped:
        return document
    note = f"{dropped} block{'s' if dropped > 1 else ''} repeated across the site left out"
    return replace(document, sections=sections, notes=[*document.notes, note])


def _site(uri: str) -> str:
    return httpx.URL(uri).host.removeprefix("www.")
