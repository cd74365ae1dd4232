"""Fusing the ranked lists of several retrievers into one.

Two methods, chosen on measured quality (bench/quality, docs/knowledge.md):

- `rrf`: reciprocal rank fusion, score = sum of weight / (k + rank). Uses only ranks, so it
  needs no calibration between retrievers; the constant k decides how much the top ranks count.
- `convex`: a weighted sum of each retriever's scores after min-max normalisation within the
  list. Uses how far apart the scores are, which RRF throws away; a hit missing from a list
  counts 0 there.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

FusionMethod = Literal["rrf", "convex"]

Ranked = Sequence[tuple[int, float]]
"""A retriever's hits: (chunk id, score), best first."""


@dataclass(frozen=True)
class Fused:
    chunk_id: int
    score: float
    contributions: dict[str, float]
    """What each retriever added to `score`."""


def rrf(lists: Mapping[str, Ranked], weights: Mapping[str, float], k: float) -> list[Fused]:
    contributions: dict[int, dict[str, float]] = {}
    for name, hits in lists.items():
        weight = weights.get(name, 1.0)
        for rank, (chunk_id, _) in enumerate(hits, start=1):
            contributions.setdefault(chunk_id, {})[name] = weight / (k + rank)
    return _ordered(contributions)


def convex(lists: Mapping[str, Ranked], weights: Mapping[str, float]) -> list[Fused]:
    contributions: dict[int, dict[str, float]] = {}
    for name, hits in lists.items():
        if not hits:
            continue
        weight = weights.get(name, 1.0)
        scores = [score for _, score in hits]
        low, high = min(scores), max(scores)
        spread = high - low
        for chunk_id, score in hits:
            normalised = (score - low) / spread if spread > 0 else 1.0
            contributions.setdefault(chunk_id, {})[name] = weight * normalised
    return _ordered(contributions)


def fuse(
    method: FusionMethod,
    lists: Mapping[str, Ranked],
    weights: Mapping[str, float],
    *,
    rrf_k: float,
) -> list[Fused]:
    if method == "rrf":
        return rrf(lists, weights, rrf_k)
    return convex(lists, weights)


def _ordered(contributions: dict[int, dict[str, float]]) -> list[Fused]:
    fused = [
        Fused(chunk_id, sum(parts.values()), parts) for chunk_id, parts in contributions.items()
    ]
    fused.sort(key=lambda f: (-f.score, f.chunk_id))
    return fused
