"""Which hits an answer cites, before and after the relative cut (issue 33, point 3).

    .venv/bin/python bench/quality/citations.py [--keep DIR]
    # writes bench/results/citations-relative-cutoff.md and .json

An answer cites the hits whose relevance is at least a share (the ratio) of the best hit's
(`answers.sources`); ratio 0 cites every hit, as answers did before the cut. This runs the
man-page set of bench/quality (the same corpus, stored the same way: run.py's `index`) through
`Retrieval.search` with answers, in three settings:

- `corpus`: the whole set (1,094 pages), top 10 hits: the cut must not cost nDCG@10;
- `site, related`: a small site on one subject: the search filtered to the query's relevant
  page and the two other pages the unfiltered search ranks highest, top 5 (hybrid_retrieve's
  default): the other pages are close to the question, and the cut must still keep the
  relevant page when one of them ranks above it;
- `site, unrelated`: the relevant page and two pages drawn at random (seeded), top 5: the
  three-page site of the issue, whose other pages say nothing about the question.

Each in three rankings: the default (convex fusion), `rrf` and `mmr` (whose hits are cut on
their fused scores, `citation_relevance`; also shown cut on MMR's own values, which it does not
do). For every ratio of the grid the cited hits are `answers.sources` of the same search's
hits, so one run measures before (ratio 0) and after; the product's own answers are checked to
cite exactly what `answers.sources` gives at its configured ratio. The ratio is chosen on the
tuning half: the largest whose nDCG@10 (of the cited pages) equals the uncut one in every
setting with the default ranking; the test half reports it.
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import metrics  # noqa: E402
import run as quality  # noqa: E402

from agentic_rag.config import Settings  # noqa: E402
from agentic_rag.embedding.embedders import LocalEmbedder  # noqa: E402
from agentic_rag.knowledge import answers  # noqa: E402
from agentic_rag.knowledge.active_space import ActiveSpace  # noqa: E402
from agentic_rag.knowledge.fusion import Fused  # noqa: E402
from agentic_rag.knowledge.results import SearchHit  # noqa: E402
from agentic_rag.knowledge.retrieval import (  # noqa: E402
    Reranker,
    Retrieval,
    RetrievalConfig,
    citation_relevance,
)
from agentic_rag.knowledge.store.search import Filters  # noqa: E402
from agentic_rag.knowledge.trajectories import TrajectoryStore  # noqa: E402

RESULTS = HERE.parent / "results"
RATIOS = tuple(round(0.05 * i, 2) for i in range(19))  # 0 (every hit) to 0.9
RANKINGS: dict[str, Reranker | None] = {"default (convex)": None, "rrf": "rrf", "mmr": "mmr"}
SETTINGS = {"corpus": 10, "site, related": 5, "site, unrelated": 5}
"""Setting -> top_k."""
SITE_PAGES = 3
MMR_VALUES = "mmr, cut on MMR's own values"
QUOTED = answers.QUOTED_PASSAGES


@dataclass
class Searched:
    """One query's search in one setting and ranking."""

    query: corpus.Query
    hits: list[SearchHit]
    relevance: list[float]
    """What the cut compares, by hit (`citation_relevance`)."""


def pages(hits: Sequence[SearchHit]) -> list[str]:
    return metrics.documents([h.provenance.chunk_id for h in hits], URIS)


URIS: dict[int, str] = {}
"""Chunk id -> its page (a document's uri)."""


def measure(searched: Sequence[Searched], ratio: float) -> dict[str, list[float]]:
    """Per query: nDCG@10 of the cited pages, whether the relevant page is cited, the citations,
    those from other pages (filler), and the filler among the quoted ones (the first three)."""
    out: dict[str, list[float]] = {
        k: [] for k in ("ndcg", "relevant_cited", "citations", "filler", "quoted_filler")
    }
    for s in searched:
        cited = answers.sources(s.hits, s.relevance, ratio)
        relevant = set(s.query.relevant)
        filler = [URIS[h.provenance.chunk_id] not in relevant for h in cited]
        out["ndcg"].append(metrics.score(pages(cited), s.query.relevant).ndcg)
        out["relevant_cited"].append(float(not all(filler)) if cited else 0.0)
        out["citations"].append(float(len(cited)))
        out["filler"].append(float(sum(filler)))
        out["quoted_filler"].append(float(sum(filler[:QUOTED])))
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def split(searched: Sequence[Searched], name: str) -> list[Searched]:
    return [s for s in searched if s.query.split == name]


async def search_all(
    retrieval: Retrieval,
    trajectories: TrajectoryStore,
    queries: Sequence[corpus.Query],
    ids: dict[str, str],
) -> tuple[dict[tuple[str, str], list[Searched]], int]:
    """Every query in every setting and ranking; and how many answers cited other hits than
    `answers.sources` at the configured ratio gives (0 when the harness measures the product)."""
    found: dict[tuple[str, str], list[Searched]] = {}
    mismatches = 0
    draw = random.Random(33)
    names = sorted(ids)
    related: dict[str, list[str]] = {}
    unrelated: dict[str, list[str]] = {}
    for setting, top_k in SETTINGS.items():
        for ranking, reranker in RANKINGS.items():
            found[(setting, ranking)] = []
            quality.log(f"{setting}, {ranking}: {len(queries)} searches")
            for query in queries:
                if setting == "corpus":
                    filters = Filters()
                elif setting == "site, related":
                    filters = Filters(document_ids=tuple(ids[p] for p in related[query.text]))
                else:
                    filters = Filters(document_ids=tuple(ids[p] for p in unrelated[query.text]))
                result = await retrieval.search(
                    quality.TENANT,
                    query.text,
                    top_k=top_k,
                    filters=filters,
                    reranker=reranker,
                    answer=True,
                )
                assert result.answer is not None
                # The fused scores, which MMR's hits are cut on, from the search's trajectory.
                trace = await trajectories.get(quality.TENANT, result.trajectory_id)
                assert trace is not None
                fused = [Fused(f["chunk_id"], f["score"], {}) for f in trace["fusion"]["output"]]
                relevance = citation_relevance(reranker, result.hits, fused)
                cited = answers.sources(result.hits, relevance, retrieval.config.citation_ratio)
                mismatches += [c.chunk_id for c in result.answer.citations] != [
                    h.provenance.chunk_id for h in cited
                ]
                found[(setting, ranking)].append(Searched(query, result.hits, relevance))
                if setting == "corpus" and reranker is None:
                    others = [p for p in pages(result.hits) if p not in query.relevant]
                    related[query.text] = [*query.relevant, *others[: SITE_PAGES - 1]]
                    pool = [p for p in names if p not in query.relevant]
                    unrelated[query.text] = [*query.relevant, *draw.sample(pool, SITE_PAGES - 1)]
        # MMR's hits cut on MMR's own values instead of their fused scores (the same searches).
        found[(setting, MMR_VALUES)] = [
            Searched(s.query, s.hits, [h.score for h in s.hits]) for s in found[(setting, "mmr")]
        ]
    return found, mismatches


def summarise(found: dict[tuple[str, str], list[Searched]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for (setting, ranking), searched in found.items():
        rows = {}
        for ratio in RATIOS:
            row: dict[str, Any] = {}
            for half in ("tuning", "test"):
                measured = measure(split(searched, half), ratio)
                row[half] = {k: mean(v) for k, v in measured.items()}
            rows[f"{ratio:g}"] = row
        table[f"{setting}: {ranking}"] = rows
    return table


def choose(found: dict[tuple[str, str], list[Searched]]) -> float:
    """The largest ratio whose nDCG@10 on the tuning half equals the uncut one in every setting
    with the default ranking (each query's, so no query loses its relevant page)."""
    default = next(iter(RANKINGS))
    chosen = 0.0
    for ratio in RATIOS:
        for setting in SETTINGS:
            tuning = split(found[(setting, default)], "tuning")
            if measure(tuning, ratio)["ndcg"] != measure(tuning, 0.0)["ndcg"]:
                return chosen
        chosen = ratio
    return chosen


def compare(found: dict[tuple[str, str], list[Searched]], ratio: float) -> dict[str, Any]:
    """Test half, `ratio` against none: paired nDCG@10 difference and the filler."""
    out = {}
    for (setting, ranking), searched in found.items():
        test = split(searched, "test")
        before, after = measure(test, 0.0), measure(test, ratio)
        out[f"{setting}: {ranking}"] = {
            "ndcg_before": mean(before["ndcg"]),
            "ndcg_after": mean(after["ndcg"]),
            "ndcg_paired": metrics.paired(after["ndcg"], before["ndcg"]),
            **{
                f"{key}_{when}": mean(values[key])
                for when, values in (("before", before), ("after", after))
                for key in ("relevant_cited", "citations", "filler", "quoted_filler")
            },
        }
    return out


def markdown(results: dict[str, Any]) -> str:
    meta, ratio = results["meta"], results["chosen_ratio"]
    lines = [
        "# Citations: the relative cut of an answer's sources (issue 33, point 3)",
        "",
        f"Run {meta['date']} on commit {meta['commit']} by `bench/quality/citations.py`: the "
        f"man-page set of bench/quality ({meta['documents']} pages, {meta['chunks']} chunks, "
        f"{meta['queries']} queries, half tuning and half test, one relevant page each) "
        "through `Retrieval.search` with answers. An answer cites the hits whose relevance "
        "(`citation_relevance`: the fused score, also under MMR) is at least the ratio times "
        "the best hit's (`answers.sources`); ratio 0 cites every hit, as before. Settings: "
        "`corpus`, the whole set, top 10; `site, related`, the search "
        "filtered to the relevant page and the two other pages the unfiltered search ranks "
        "highest (a small site on one subject), top 5; `site, unrelated`, the relevant page "
        "and two random ones (like the issue's three-page site), top 5. The hits themselves are "
        "the same at every ratio: retrieval's own nDCG@10 is unchanged.",
        "",
        f"**Chosen on the tuning half: ratio {ratio:g}**, the largest whose nDCG@10 of the "
        "cited pages equals the uncut one in every setting with the default ranking (no "
        f"tuning query loses its relevant page). The product's configured ratio: "
        f"{meta['configured_ratio']:g}; its answers cited exactly what `answers.sources` "
        f"gives at it in {meta['searches'] - meta['mismatches']} of {meta['searches']} searches.",
        "",
        f"## Test half: ratio {ratio:g} against none (before)",
        "",
        "nDCG@10 of the cited pages with its paired difference (95% bootstrap interval, "
        "queries that lose / gain); per answer: whether the relevant page is cited, "
        "citations, citations of other pages (filler), and filler among the three passages "
        "the extractive answer quotes.",
        "",
        "| setting, ranking | nDCG@10 before | after | difference [95% CI] (lose/gain) "
        "| relevant cited before / after | citations before / after | filler before / after "
        "| quoted filler before / after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, c in results["test"].items():
        p = c["ndcg_paired"]
        lines.append(
            f"| {name} | {c['ndcg_before']:.4f} | {c['ndcg_after']:.4f} | "
            f"{p['difference']:+.4f} [{p['ci95_low']:+.4f}, {p['ci95_high']:+.4f}] "
            f"({p['losses']}/{p['wins']}) | "
            f"{c['relevant_cited_before']:.3f} / {c['relevant_cited_after']:.3f} | "
            f"{c['citations_before']:.2f} / {c['citations_after']:.2f} | "
            f"{c['filler_before']:.2f} / {c['filler_after']:.2f} | "
            f"{c['quoted_filler_before']:.2f} / {c['quoted_filler_after']:.2f} |"
        )
    lines += [
        "",
        "## Every ratio, tuning half (test half in brackets)",
        "",
        "nDCG@10 of the cited pages, and filler citations per answer.",
        "",
    ]
    shown = [f"{r:g}" for r in RATIOS if r <= 0.6]
    lines.append("| setting, ranking | " + " | ".join(shown) + " |")
    lines.append("| --- |" + " ---: |" * len(shown))
    for name, rows in results["grid"].items():
        cells = [
            f"{rows[r]['tuning']['ndcg']:.4f} ({rows[r]['test']['ndcg']:.4f}); "
            f"{rows[r]['tuning']['filler']:.2f} ({rows[r]['test']['filler']:.2f})"
            for r in shown
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Not measured: the `cross-encoder` and `llm` rerankers (no model of either runs offline "
        "here: bench/quality/report.py, NOT_MEASURED). Their scores are a cross-encoder's "
        "logits, compared as probabilities, and the LLM's 0-10 grades.",
        "",
        f"Timings: {json.dumps(meta['timings'])}. Load average at the end: "
        f"{meta['load_average_at_end']:.1f} (2 shared cores).",
        "",
    ]
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    documents = corpus.reproduce(corpus.read_entries())
    queries = corpus.read_queries()
    embedder = LocalEmbedder(threads=args.threads)
    config = RetrievalConfig()
    timings: dict[str, float] = {}
    try:
        async with quality.corpus_store(documents, embedder, args.keep) as (
            _,
            pool,
            store,
            indexed,
            _,
        ):
            timings |= {k: round(v, 1) for k, v in indexed.timings.items()}
            URIS.update(indexed.document_of)
            rows = await pool.fetch(  # the harness's own read: each page's document id
                "SELECT uri, id::text AS id FROM documents WHERE tenant = $1", quality.TENANT
            )
            ids = {r["uri"]: r["id"] for r in rows}
            active = ActiveSpace(
                store, embedder, Settings.model_fields["chunk_overlap_tokens"].default
            )
            await active.open()
            trajectories = TrajectoryStore(pool)
            retrieval = Retrieval(store, trajectories, embedder, active, config)
            t = time.perf_counter()
            found, mismatches = await search_all(retrieval, trajectories, queries, ids)
            timings["searches_s"] = round(time.perf_counter() - t, 1)
    finally:
        await embedder.aclose()
    chosen = choose(found)
    timings["total_s"] = round(time.perf_counter() - started, 1)
    results = {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": quality.git_commit(),
            "documents": indexed.documents,
            "chunks": len(indexed.chunk_ids),
            "queries": len(queries),
            "configured_ratio": config.citation_ratio,
            "searches": sum(len(s) for s in found.values()),
            "mismatches": mismatches,
            "load_average_at_end": os.getloadavg()[0],
            "timings": timings,
        },
        "chosen_ratio": chosen,
        "test": compare(found, chosen),
        "grid": summarise(found),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.output}.md").write_text(markdown(results))
    quality.log(f"wrote bench/results/{args.output}.md and .json")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="embedder threads (default 2)")
    parser.add_argument(
        "--output", default="citations-relative-cutoff", help="file stem under bench/results/"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the database in this directory and reuse its corpus on the next run",
    )
    asyncio.run(main(parser.parse_args()))
