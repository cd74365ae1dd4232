"""Document-level ranking metrics at a cutoff, and paired comparisons of two methods."""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

CUTOFF = 10


def documents(ranked_chunks: Iterable[int], document_of: dict[int, str]) -> list[str]:
    """A ranked list of chunks as a ranked list of documents: each at its best chunk's rank."""
    seen: dict[str, None] = {}
    for chunk in ranked_chunks:
        seen.setdefault(document_of[chunk], None)
    return list(seen)


@dataclass(frozen=True)
class Scores:
    ndcg: float
    mrr: float
    recall: float


def score(ranked: Sequence[str], relevant: Sequence[str], k: int = CUTOFF) -> Scores:
    top = ranked[:k]
    wanted = set(relevant)
    gains = [1.0 / math.log2(i + 2) for i, d in enumerate(top) if d in wanted]
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(wanted), k)))
    first = next((i for i, d in enumerate(top, start=1) if d in wanted), None)
    return Scores(
        ndcg=sum(gains) / ideal,
        mrr=1.0 / first if first else 0.0,
        recall=len(wanted & set(top)) / len(wanted),
    )


def mean(scores: Sequence[Scores]) -> dict[str, float]:
    n = len(scores)
    return {
        "ndcg@10": sum(s.ndcg for s in scores) / n,
        "mrr@10": sum(s.mrr for s in scores) / n,
        "recall@10": sum(s.recall for s in scores) / n,
        "queries": n,
    }


def paired(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000) -> dict[str, float]:
    """a - b: the mean difference, its 95% paired-bootstrap interval, and a two-sided sign test
    over the queries where they differ."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    return {
        "difference": float(diff.mean()),
        "ci95_low": float(low),
        "ci95_high": float(high),
        "wins": wins,
        "losses": losses,
        "ties": len(diff) - wins - losses,
        "sign_test_p": sign_test(wins, losses),
    }


def sign_test(wins: int, losses: int) -> float:
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)
