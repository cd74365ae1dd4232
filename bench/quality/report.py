"""The run's numbers as results.json and results.md: methods, targets, choices."""

from collections.abc import Sequence
from typing import Any

import metrics
from plain import OPTION, PLAIN

from agentic_rag.knowledge.store.search import EXACT_SEARCH_MAX_CHUNKS, HNSW_EF_SEARCH

DENSE, LEXICAL = "dense", "lexical"
HNSW = "dense, HNSW path"
EXACT_OURS = "dense, exact numpy over our vectors"
REFERENCE = "reference dense (fp32, exact)"
BM25S = "bm25s"
NOT_MEASURED = {
    "cross-encoder": "no cross-encoder model is available offline here: no package on PyPI "
    "or Debian ships one that the machines can install (AGENTIC_RAG_RERANKER_DIRECTORY needs "
    "a local model.onnx and tokenizer.json)",
    "llm": "no LLM is reachable offline (it needs an OpenAI-compatible endpoint); the graph "
    "issue adds a local one",
}
MIN_FUSION_GAIN = 0.02


def best(run: Any, names: Sequence[str], split: str) -> str:
    """The method with the highest mean nDCG@10 on `split` (then MRR@10; then listed first)."""

    def key(name: str) -> tuple[float, float]:
        summary = run.summary(name)[split]
        return (round(summary["ndcg@10"], 6), round(summary["mrr@10"], 6))

    return max(names, key=key)  # max keeps the first of equals


def overlap_at_10(run: Any, method: str, exact: str) -> float:
    """Of the exact search's top 10 chunks, the share `method` finds in its top 10."""
    shares = [
        len(set(a[:10]) & set(b[:10])) / max(1, len(b[:10]))
        for a, b in zip(run.ranked[method], run.ranked[exact], strict=True)
    ]
    return sum(shares) / len(shares)


def rank_of_relevant(run: Any, method: str) -> list[int | None]:
    out = []
    for query, chunks in zip(run.queries, run.ranked[method], strict=True):
        docs = metrics.documents(chunks, run.document_of)
        out.append(next((i for i, d in enumerate(docs, 1) if d in query.relevant), None))
    return out


def assemble(
    run: Any,
    *,
    fusions: Sequence[str],
    default: str,
    chosen: str,
    rerankers: Sequence[str],
    meta: dict[str, Any],
    lexical_diagnosis: dict[str, Any],
    dense_study: dict[str, Any],
) -> dict[str, Any]:
    methods = {}
    for name in run.ranked:
        methods[name] = run.summary(name)
        if run.latency_ms.get(name):
            latencies = sorted(run.latency_ms[name])
            methods[name]["latency_ms"] = {
                "mean": sum(latencies) / len(latencies),
                "p50": latencies[len(latencies) // 2],
                "p95": latencies[int(len(latencies) * 0.95)],
            }
    singles = [DENSE, LEXICAL]
    best_single_tuning = best(run, singles, "tuning")
    test_single = max(singles, key=lambda m: methods[m]["test"]["ndcg@10"])
    comparisons: dict[str, Any] = {}
    targets = []
    if REFERENCE in run.ranked:
        # Our chunk vectors against the reference's, both searched alone (the product's dense
        # leg also weighs each document's own vector, which the reference does not have).
        for split in (None, "test"):
            comparisons[f"our chunk vectors - reference ({split or 'all'})"] = metrics.paired(
                run.ndcg(EXACT_OURS, split), run.ndcg(REFERENCE, split)
            )
        c = comparisons["our chunk vectors - reference (all)"]
        targets.append(
            {
                "target": "our int8 chunk vectors equal to the fp32 reference's within noise "
                "(exact search of the chunks alone; nDCG@10, all queries)",
                "measured": f"{methods[EXACT_OURS]['all']['ndcg@10']:.4f} vs "
                f"{methods[REFERENCE]['all']['ndcg@10']:.4f}",
                "difference": c["difference"],
                "ci95": [c["ci95_low"], c["ci95_high"]],
                "sign_test_p": c["sign_test_p"],
                "met": c["ci95_low"] <= 0 <= c["ci95_high"],
            }
        )
    if BM25S in run.ranked:
        for split in (None, "test"):
            comparisons[f"lexical - bm25s ({split or 'all'})"] = metrics.paired(
                run.ndcg(LEXICAL, split), run.ndcg(BM25S, split)
            )
        c = comparisons["lexical - bm25s (all)"]
        targets.append(
            {
                "target": "lexical at least as good as bm25s (nDCG@10, all queries)",
                "measured": f"{methods[LEXICAL]['all']['ndcg@10']:.4f} vs "
                f"{methods[BM25S]['all']['ndcg@10']:.4f}",
                "difference": c["difference"],
                "ci95": [c["ci95_low"], c["ci95_high"]],
                "sign_test_p": c["sign_test_p"],
                "met": c["difference"] >= 0,
            }
        )
    for split in (None, "test"):
        comparisons[f"dense - plain model ({split or 'all'})"] = metrics.paired(
            run.ndcg(DENSE, split), run.ndcg(PLAIN, split)
        )
    c = comparisons["dense - plain model (test)"]
    targets.append(
        {
            "target": "dense at least as good as its model used plainly (title + 150-word "
            "windows, best window per document; nDCG@10, test half; issue 17, point 14)",
            "measured": f"{methods[DENSE]['test']['ndcg@10']:.4f} vs "
            f"{methods[PLAIN]['test']['ndcg@10']:.4f}",
            "difference": c["difference"],
            "ci95": [c["ci95_low"], c["ci95_high"]],
            "sign_test_p": c["sign_test_p"],
            "met": c["difference"] >= 0,
        }
    )
    options = dense_study["options"]
    dense_study["chosen_on_tuning_half"] = best(run, options, "tuning")
    families: dict[str, list[str]] = {}
    for name in options:
        families.setdefault(name.split(" x ")[-1], []).append(name)
    dense_study["best_of_each_kind_on_tuning_half"] = {
        kind: best(run, names, "tuning") for kind, names in families.items()
    }
    for split in (None, "test"):
        comparisons[f"{dense_study['chosen_on_tuning_half']} - plain model ({split or 'all'})"] = (
            metrics.paired(
                run.ndcg(dense_study["chosen_on_tuning_half"], split), run.ndcg(PLAIN, split)
            )
        )
    c = metrics.paired(run.ndcg(chosen, "test"), run.ndcg(test_single, "test"))
    comparisons[f"{chosen} - {test_single} (test)"] = c
    targets.append(
        {
            "target": f"best fused (chosen on the tuning half: {chosen}) at least "
            f"{MIN_FUSION_GAIN} nDCG@10 above the best single retriever ({test_single}), "
            "test half",
            "measured": f"{methods[chosen]['test']['ndcg@10']:.4f} vs "
            f"{methods[test_single]['test']['ndcg@10']:.4f}",
            "difference": c["difference"],
            "ci95": [c["ci95_low"], c["ci95_high"]],
            "sign_test_p": c["sign_test_p"],
            "met": c["difference"] >= MIN_FUSION_GAIN,
        }
    )
    c = metrics.paired(run.ndcg(default, "test"), run.ndcg(test_single, "test"))
    comparisons[f"{default} - {test_single} (test)"] = c
    variants = lexical_diagnosis["variants"]
    if BM25S in run.ranked:
        lexical_diagnosis["vs_bm25s_all_queries"] = {
            name: metrics.paired(run.ndcg(name), run.ndcg(BM25S)) for name in variants
        }
        lexical_diagnosis["vs_product_all_queries"] = {
            name: metrics.paired(run.ndcg(name), run.ndcg(LEXICAL)) for name in variants
        }
    index_check = {
        "hnsw_overlap_at_10_with_exact": overlap_at_10(run, HNSW, DENSE),
        "exact_numpy_overlap_at_10_with_dense": overlap_at_10(run, EXACT_OURS, DENSE),
    }
    per_query = {
        name: rank_of_relevant(run, name)
        for name in (DENSE, LEXICAL, REFERENCE, BM25S, PLAIN, default, chosen)
        if name in run.ranked
    }
    return {
        "meta": meta,
        "methods": methods,
        "groups": {
            "single": [
                n
                for n in run.ranked
                if n not in fusions
                and n not in rerankers
                and n not in variants
                and n not in options
            ],
            "dense_options": list(options),
            "fusion": list(fusions),
            "rerank": list(rerankers),
        },
        "choices": {
            "product_default_fusion": default,
            "chosen_fusion_on_tuning_half": chosen,
            "best_single_on_tuning_half": best_single_tuning,
            "best_single_on_test_half": test_single,
        },
        "targets": targets,
        "comparisons": comparisons,
        "index_check": index_check,
        "not_measured": NOT_MEASURED,
        "lexical_diagnosis": lexical_diagnosis,
        "dense_study": dense_study,
        "per_query_rank_of_relevant": {
            "queries": [q.id for q in run.queries],
            "splits": [q.split for q in run.queries],
            **per_query,
        },
    }


def _row(name: str, m: dict[str, Any], *, latency: bool = True) -> str:
    a, tu, te = m["all"], m["tuning"], m["test"]
    lat = m.get("latency_ms", {}).get("p50")
    cells = [
        name,
        f"{a['ndcg@10']:.4f}",
        f"{a['mrr@10']:.4f}",
        f"{a['recall@10']:.4f}",
        f"{tu['ndcg@10']:.4f}",
        f"{te['ndcg@10']:.4f}",
        str(a["queries"]),
    ]
    if latency:
        cells.append(f"{lat:.1f}" if lat is not None else "")
    return "| " + " | ".join(cells) + " |"


_HEADER = (
    "| method | nDCG@10 | MRR@10 | recall@10 | nDCG@10 tuning | nDCG@10 test | queries "
    "| p50 ms |\n|---|---|---|---|---|---|---|---|"
)


def markdown(results: dict[str, Any]) -> str:
    meta, methods = results["meta"], results["methods"]
    t = meta["timings"]
    lines = [
        "# Retrieval quality: the man-page set (bench/quality)",
        "",
        f"Run {meta['date']} on commit {meta['commit']}: {meta['documents']} documents, "
        f"{meta['chunks']} chunks, {meta['queries']} queries (half tuning, half test); "
        f"each retriever returns {meta['depth']} chunks. Scores are per document (a document "
        "counts at its best chunk), at 10 documents.",
        "",
        (
            f"Timings: corpus {t['corpus_s']:.0f} s, chunking {t['chunk_s']:.0f} s, embedding "
            f"{t['embed_s']:.0f} s ({meta['chunks'] / t['embed_s']:.1f} chunks/s, "
            f"{meta['embedder_threads']} threads), writes {t['write_s']:.0f} s, retrieval "
            f"{t['retrieve_s']:.0f} s"
            if t["embed_s"]
            else f"Timings: the corpus was reused from a kept database (--keep); retrieval "
            f"{t['retrieve_s']:.0f} s"
        )
        + (
            f", reference {t['reference_s']:.0f} s (fp32 embedding {t['reference_embed_s']:.0f} s)"
            if "reference_s" in t
            else ""
        )
        + f"; total {t['total_s']:.0f} s. Load average at the end: "
        f"{meta['load_average_at_end']:.1f} (2 shared cores). Yardsticks: {meta['reference']}.",
        "",
        "## Targets (issue 9, point 24; issue 17, point 14)",
        "",
        "| target | measured | difference | 95% CI (paired bootstrap) | sign test p | met |",
        "|---|---|---|---|---|---|",
    ]
    for target in results["targets"]:
        low, high = target["ci95"]
        lines.append(
            f"| {target['target']} | {target['measured']} | {target['difference']:+.4f} | "
            f"[{low:+.4f}, {high:+.4f}] | {target['sign_test_p']:.3f} | "
            f"{'yes' if target['met'] else '**no**'} |"
        )
    lines += ["", "## Single retrievers and yardsticks", "", _HEADER]
    lines += [_row(n, methods[n]) for n in results["groups"]["single"]]
    check = results["index_check"]
    lines += [
        "",
        f"`dense` is KnowledgeStore.dense as this tenant gets it (exact scan: at most "
        f"{EXACT_SEARCH_MAX_CHUNKS:,} chunks; each chunk scored with its document's own "
        "vector). `dense, HNSW path` forces the HNSW index "
        f"(ef_search {HNSW_EF_SEARCH}, iterative scan): it finds "
        f"{check['hnsw_overlap_at_10_with_exact']:.3f} of the exact top 10 "
        "chunks. `exact numpy` is a brute-force search over the chunk vectors we stored, "
        "without the documents' own vectors (overlap with `dense`: "
        f"{check['exact_numpy_overlap_at_10_with_dense']:.3f}).",
    ]
    if "vector_cosine_ours_vs_fp32_mean" in t:
        lines.append(
            f"Our int8 ONNX vectors against the fp32 reference's, chunk by chunk: mean cosine "
            f"{t['vector_cosine_ours_vs_fp32_mean']:.4f}, lowest "
            f"{t['vector_cosine_ours_vs_fp32_min']:.4f}."
        )
    lines.append(
        "The plan of the HNSW row reads the HNSW index: "
        f"{'yes' if meta['hnsw_plan_reads_the_index'] else 'NO'}."
    )
    diagnosis = results["lexical_diagnosis"]
    lines += [
        "",
        "## The lexical leg against bm25s: variants (the harness's own SQL, same chunks)",
        "",
        "The first variant re-implements KnowledgeStore.lexical; it ranks exactly as the "
        f"product does: {'yes' if diagnosis['reimplementation_ranks_as_the_product'] else 'NO'}."
        " Differences are nDCG@10 over all queries, with 95% paired-bootstrap intervals.",
        "",
        "| variant | nDCG@10 | MRR@10 | recall@10 | nDCG@10 tuning | nDCG@10 test | "
        "vs bm25s | vs the product |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in diagnosis["variants"]:
        m = methods[name]
        cells = [
            name.removeprefix("lexical variant: "),
            *(f"{m['all'][k]:.4f}" for k in ("ndcg@10", "mrr@10", "recall@10")),
            f"{m['tuning']['ndcg@10']:.4f}",
            f"{m['test']['ndcg@10']:.4f}",
        ]
        for key in ("vs_bm25s_all_queries", "vs_product_all_queries"):
            c = diagnosis.get(key, {}).get(name)
            cells.append(
                f"{c['difference']:+.4f} [{c['ci95_low']:+.4f}, {c['ci95_high']:+.4f}]" if c else ""
            )
        lines.append("| " + " | ".join(cells) + " |")
    study = results["dense_study"]
    lines += [
        "",
        "## Dense against its model used plainly (issue 17, point 14)",
        "",
        f"`{PLAIN}`: every document's stored text in {study['windows']:,} windows of 150 words, "
        "each after the document's title, embedded by the same LocalEmbedder (int8 ONNX "
        f"MiniLM; {study['windows_over_the_model_limit']:,} windows are longer than its "
        "256 tokens and read truncated, as the model reads them), exact search, a document "
        "at its best window. The options rank documents from the product's stored chunk "
        "vectors (exact numpy search): a document's best chunk plus `w` times a "
        "document-level similarity (the mean of its chunk vectors, or its first plain "
        "window) or its second best chunk. Chosen on the tuning half: "
        f"**{study['chosen_on_tuning_half'].removeprefix(OPTION)}**.",
        "",
        _HEADER.replace(" p50 ms |", "").replace(
            "|---|---|---|---|---|---|---|---|", "|---|---|---|---|---|---|---|"
        ),
        _row(DENSE, methods[DENSE], latency=False),
        _row(PLAIN, methods[PLAIN], latency=False),
    ]
    lines += [
        _row(n.removeprefix(OPTION), methods[n], latency=False)
        for n in results["groups"]["dense_options"]
    ]
    lines += ["", "Best weight of each kind on the tuning half:", ""]
    for kind, name in study["best_of_each_kind_on_tuning_half"].items():
        m = methods[name]
        lines.append(
            f"- {kind.removeprefix(OPTION)}: {name.removeprefix(OPTION)} (nDCG@10 tuning "
            f"{m['tuning']['ndcg@10']:.4f}, test {m['test']['ndcg@10']:.4f})"
        )
    choices = results["choices"]
    lines += [
        "",
        "## Fusion (dense + lexical), chosen on the tuning half",
        "",
        f"Chosen on the tuning half: **{choices['chosen_fusion_on_tuning_half']}**. "
        f"The product's default today: {choices['product_default_fusion']}. The rows ending "
        "in `lexical split at every non-alphanumeric` fuse the recommended lexical variant "
        "(below) instead of today's lexical leg; over the whole grid, the tuning half then "
        f"chooses **{meta['chosen_fusion_with_recommended_lexical']}**.",
        "",
        _HEADER.replace(" p50 ms |", "").replace(
            "|---|---|---|---|---|---|---|---|", "|---|---|---|---|---|---|---|"
        ),
    ]
    lines += [_row(n, methods[n], latency=False) for n in results["groups"]["fusion"]]
    lines += ["", "## Rerankers", "", _HEADER]
    lines += [_row(n, methods[n]) for n in results["groups"]["rerank"]]
    lines.append("")
    for name, why in results["not_measured"].items():
        lines.append(f"- `{name}`: not measured: {why}.")
    lines += ["", "## Paired comparisons (nDCG@10)", ""]
    lines += ["| comparison | difference | 95% CI | wins / losses / ties | sign test p |",
              "|---|---|---|---|---|"]  # fmt: skip
    for name, c in results["comparisons"].items():
        lines.append(
            f"| {name} | {c['difference']:+.4f} | [{c['ci95_low']:+.4f}, {c['ci95_high']:+.4f}]"
            f" | {c['wins']} / {c['losses']} / {c['ties']} | {c['sign_test_p']:.3f} |"
        )
    search = meta["search_check"]
    lines += [
        "",
        f"Retrieval.search with the default RetrievalConfig on the test half returned the same "
        f"top 10 documents as the harness's fusion for {search['same_top10_documents']} "
        f"queries, different for {search['different']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    source = Path(sys.argv[1])  # results.json: write its results.md again
    source.with_suffix(".md").write_text(markdown(json.loads(source.read_text())))
