"""BM25 for the lexical leg: the scores, and which chunks are worth scoring.

A chunk's score is the sum, over the query's terms it holds, of `idf(t) * tf-part`, and a
tf-part stays below `k1 + 1` whatever the chunk. So a chunk holding the terms S scores below
`bound(S) = (k1 + 1) * sum(idf(t) for t in S)`. Once `k` chunks scoring at least θ are known,
a chunk can enter the top `k` only if its terms reach a bound of θ: the smallest such term sets,
asked of the index as conjunctions ("famili AND remov"), find every chunk that can, and no
chunk that holds only frequent words. The store runs that plan (KnowledgeStore.lexical).

The index answers a term set by reading the postings of its rarest term and skipping through
the others' to those chunks, so a set costs about the document frequency of its rarest term
(12-16 ms per 100,000 postings at a million chunks: bench/results/knowledge-scale-findings.md).
A plan within a budget of postings asks the cheapest sets first and leaves out the rest.
"""

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

K1 = 1.2
B = 0.75
# Term sets are planned over the query's rarest terms only (2^8 subsets at most); the others
# still count in every score.
PLANNED_TERMS = 8

_TSVECTOR_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


@dataclass(frozen=True, slots=True)
class Term:
    lexeme: str
    df: int  # chunks of the tenant holding it
    idf: float

    @property
    def bound(self) -> float:
        """The most this term adds to any chunk's score."""
        return self.idf * (K1 + 1)


def query_terms(found: Iterable[tuple[str, int]], chunks: int) -> list[Term]:
    """The (lexeme, df) pairs of a query that the tenant's chunks hold, rarest first."""
    present = sorted({(df, lexeme) for lexeme, df in found if df > 0})
    return [
        Term(lexeme, df, math.log(1 + (chunks - df + 0.5) / (df + 0.5))) for df, lexeme in present
    ]


def reaching(terms: Sequence[Term], threshold: float) -> list[tuple[Term, ...]]:
    """The smallest sets of `terms` whose bound reaches `threshold`: a chunk that holds none of
    them in full scores below `threshold`."""
    found: list[tuple[Term, ...]] = []
    for size in range(1, len(terms) + 1):
        for subset in itertools.combinations(terms, size):
            if sum(t.bound for t in subset) >= threshold and not any(
                set(smaller) <= set(subset) for smaller in found
            ):
                found.append(subset)
    return found


def affordable(
    sets: Sequence[tuple[Term, ...]], postings: int
) -> tuple[list[tuple[Term, ...]], bool]:
    """The cheapest of `sets` whose postings add up to at most `postings` (the cheapest one
    whatever it costs), and whether that is all of them."""
    chosen: list[tuple[Term, ...]] = []
    spent = 0
    for terms in sorted(sets, key=cost):
        if chosen and spent + cost(terms) > postings:
            return chosen, False
        chosen.append(terms)
        spent += cost(terms)
    return chosen, True


def cost(terms: Sequence[Term]) -> int:
    """The postings the index reads to find the chunks holding every one of `terms`."""
    return min(t.df for t in terms)


def opening_threshold(terms: Sequence[Term], chunks: int, wanted: int) -> float:
    """The highest bound that about `wanted` chunks reach, were terms independent: where to
    start, so that the first conjunctions asked are the selective ones."""
    share = [t.df / chunks for t in terms]
    reached: dict[float, float] = {}
    for holds in itertools.product((False, True), repeat=len(terms)):
        probability = math.prod(p if h else 1 - p for p, h in zip(share, holds, strict=True))
        bound = sum(t.bound for t, h in zip(terms, holds, strict=True) if h)
        reached[bound] = reached.get(bound, 0.0) + probability
    expected = 0.0
    for bound in sorted(reached, reverse=True):
        expected += reached[bound] * chunks
        if bound > 0 and expected >= wanted:
            return bound
    return min(t.bound for t in terms)


def term_frequencies(tsvector: str) -> dict[str, int]:
    """Lexeme -> occurrences, from a tsvector's text form ('famili':3,17A 'oper':5)."""
    return {
        lexeme.replace("''", "'"): positions.count(",") + 1
        for lexeme, positions in _TSVECTOR_ENTRY.findall(tsvector)
    }


def score(
    frequencies: Mapping[str, int], idf: Mapping[str, float], length: int, average: float
) -> float:
    norm = K1 * (1 - B + B * length / average)
    return sum(idf[t] * tf * (K1 + 1) / (tf + norm) for t, tf in frequencies.items() if t in idf)


class Scorer:
    """`score(term_frequencies(text), idf, length, average)` in one pass over a chunk's query
    terms' tsvector text, the same sum term by term: no dict of frequencies, no lexeme
    unescaped (the lexicon is keyed as the text spells it). Half the Python time of the two,
    which the lexical leg spends on up to `LEXICAL_CANDIDATES` chunks a search."""

    def __init__(self, idf: Mapping[str, float], average: float) -> None:
        # A lexeme's text doubles its quotes, and a quote in the text is always doubled.
        self._idf = {lexeme.replace("'", "''"): weight for lexeme, weight in idf.items()}
        self._average = average

    def __call__(self, tsvector: str, length: int) -> float:
        norm = K1 * (1 - B + B * length / self._average)
        parts: list[float] = []
        for lexeme, positions in _TSVECTOR_ENTRY.findall(tsvector):
            weight = self._idf.get(lexeme)
            if weight is not None:
                tf = positions.count(",") + 1
                parts.append(weight * tf * (K1 + 1) / (tf + norm))
        return sum(parts)
