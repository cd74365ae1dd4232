"""explain_answer's text: a report a person reads in a minute.

The structured Explanation keeps every list in full (up to a hundred hits per retriever); the
report shows the plan with only the parameters that applied, the top `TOP` of each stage with
document titles, ranks and scores, the time of each stage, and the sources with their spans.
"""

from collections.abc import Callable, Sequence
from typing import Any

from agentic_rag.knowledge.results import Explanation, RankedChunk, SearchHit
from agentic_rag.knowledge.store import KnowledgeStore

TOP = 5
"""Hits shown per retriever, of the fusion and of the reranking."""

_LEGS = ("embed_query", "dense", "lexical", "graph", "graph_filters")
"""Stages inside the retrieve stage: the legs run at once, so their times overlap."""
_STAGES = ("retrieve", "fusion", "rerank", "fetch", "answer")
"""The stages one after the other, in their order (the stored trace keeps no key order)."""


async def with_titles(store: KnowledgeStore, tenant: str, explanation: Explanation) -> Explanation:
    """The explanation with the document title of every chunk it names."""
    named = {r.chunk_id for ranked in explanation.retrievers.values() for r in ranked}
    named |= {f.chunk_id for f in explanation.fusion.output}
    if explanation.rerank is not None:
        named |= {r.chunk_id for r in explanation.rerank.before + explanation.rerank.after}
    titles = {h.provenance.chunk_id: h.provenance.title for h in explanation.hits}
    missing = sorted(named - titles.keys())
    if missing:
        titles |= {c: hit.title for c, hit in (await store.hits(tenant, missing)).items()}
    return explanation.model_copy(update={"titles": titles})


def explanation_text(explanation: Explanation) -> str:
    e = explanation
    lines = [f"Retrieval {e.trajectory_id} for {e.query!r}", "", *_plan(e.plan), ""]
    lines.append(f"Retrievers (top {TOP} of each):")
    for name in sorted(e.retrievers, key=_order(e.plan.get("retrievers", []))):
        ranked = e.retrievers[name]
        lines.append(f"  {name}: {len(ranked)} hits")
        lines += [f"    {_ranked(r, e.titles)}" for r in ranked[:TOP]]
    for fact in e.graph_facts[:TOP]:
        lines.append(f"    fact #{fact.rank} {fact.score:.3f}: {_short(fact.fact, 80)}")
    for entity in e.graph_entities[:TOP]:
        lines.append(f"    entity #{entity.rank} {entity.score:.3f}: {entity.name}")
    lines += ["", *_fusion(e), ""]
    if e.rerank is not None:
        lines += [*_rerank(e), ""]
    lines += [f"Time: {_times(e.timings_ms)}", ""]
    if e.answer is not None:
        lines += [f"Answer ({e.answer.mode}): {_short(e.answer.text, 300)}", ""]
    lines.append(f"Sources ({len(e.hits)}):" if e.hits else "Sources: none")
    lines += [_source(hit) for hit in e.hits]
    lines += [
        "",
        "(every list in full, with each retriever's contribution, is in the structured content)",
    ]
    return "\n".join(lines)


def _plan(plan: dict[str, Any]) -> list[str]:
    retrievers = ", ".join(plan.get("retrievers", [])) or "none"
    fusion = dict(plan.get("fusion", {}))
    method = fusion.pop("method", "none")
    parameters = ", ".join(f"{k} {_value(v)}" for k, v in fusion.items())
    lines = [
        f"Plan: {retrievers}, {plan.get('candidates_per_retriever')} candidates each; "
        f"fusion {method}" + (f" ({parameters})" if parameters else "") + "; "
        f"reranker {plan.get('reranker') or 'none'}; top {plan.get('top_k')}",
    ]
    details = [f"embedding model {plan.get('embedding_model')}"]
    if plan.get("similarity_threshold") is not None:
        details.append(f"similarity threshold {plan['similarity_threshold']}")
    if plan.get("citation_ratio") is not None:
        details.append(f"answer cites hits at {plan['citation_ratio']} of the best score or more")
    if plan.get("filters"):
        details.append(f"filters {_value(plan['filters'])}")
    return [*lines, "      " + "; ".join(details)]


def _fusion(e: Explanation) -> list[str]:
    inputs = " + ".join(f"{name} {count}" for name, count in e.fusion.inputs.items())
    method = e.plan.get("fusion", {}).get("method", "none")
    lines = [f"Fusion ({method}) of {inputs or 'nothing'} (top {TOP}):"]
    for fused in e.fusion.output[:TOP]:
        parts = " + ".join(f"{name} {value:.3f}" for name, value in fused.contributions.items())
        lines.append(
            f"    {fused.rank}. {fused.score:.3f} {_title(fused.chunk_id, e.titles)} = {parts}"
        )
    return lines


def _rerank(e: Explanation) -> list[str]:
    assert e.rerank is not None
    before = {r.chunk_id: r.rank for r in e.rerank.before}
    lines = [f"Reranking ({e.rerank.reranker}) of the top {len(e.rerank.before)} (top {TOP}):"]
    for r in e.rerank.after[:TOP]:
        lines.append(f"    {_ranked(r, e.titles)}, was #{before.get(r.chunk_id, '?')}")
    return lines


def _times(timings: dict[str, float]) -> str:
    """Sequential stages with their total; the legs inside `retrieve` in brackets."""
    names = sorted(timings, key=_order(_LEGS + _STAGES))
    legs = ", ".join(f"{name} {timings[name]:.1f}" for name in names if name in _LEGS)
    stages = [(name, timings[name]) for name in names if name not in _LEGS]
    parts = [
        f"{name} {ms:.1f} ms" + (f" ({legs})" if name == "retrieve" and legs else "")
        for name, ms in stages
    ]
    return ", ".join(parts) + f"; total {sum(ms for _, ms in stages):.1f} ms"


def _source(hit: SearchHit) -> str:
    p = hit.provenance
    where = [f"chars {p.char_start}-{p.char_end}"]
    if p.page is not None:
        where.insert(0, f"page {p.page}")
    if p.start_seconds is not None:
        where.insert(0, f"at {p.start_seconds:.0f}s")
    if p.heading_path:
        where.append(" > ".join(p.heading_path))
    found_by = ", ".join(f"{name} #{s.rank}" for name, s in hit.retrievers.items())
    source = p.title if p.uri == p.title else f"{p.title} ({p.uri})"
    found = f"; {found_by}" if found_by else ""
    return f"  [{hit.rank}] {hit.score:.3f} {source}, {', '.join(where)}{found}"


def _order(known: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """A sort key: the names in `known` in its order, any other after them by name."""
    return lambda name: (known.index(name) if name in known else len(known), name)


def _ranked(r: RankedChunk, titles: dict[int, str]) -> str:
    return f"{r.rank}. {r.score:.3f} {_title(r.chunk_id, titles)}"


def _title(chunk_id: int, titles: dict[int, str]) -> str:
    return f"{titles.get(chunk_id, '(deleted)')} [chunk {chunk_id}]"


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "/".join(map(str, value))
    return str(value)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
