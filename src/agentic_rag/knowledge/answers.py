"""Answers with numbered citations: synthesised by the LLM when one is configured and checked
against the passages it cites (grounding.py), otherwise extractive: whole sentences of the best
passages that answer the question, quoted, numbered, with a line that says why they are quotes.
The sources an answer may cite are the hits that score near the best (`sources`)."""

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rag.knowledge import grounding
from agentic_rag.knowledge.results import SearchHit
from agentic_rag.llm.chat import Chat

NO_LLM = "No LLM is configured, so this answer quotes the best passages"
NO_CLIENT_MODEL = (
    "No LLM is configured and the client's model was asked for, but {why}, so this answer "
    "quotes the best passages"
)
NOTHING_FOUND = "Nothing in the knowledge base matches this question."
QUOTED_PASSAGES = 3
SENTENCES_PER_PASSAGE = 2
LIST_ITEMS_QUOTED = 4
"""When the quote ends by announcing a list ("Advantages include:"), its first items follow."""
ANSWER_TOKENS = 256
"""Enough for a few cited sentences; a small local model that rambles is cut off sooner."""

ANSWER_INSTRUCTIONS = (
    "Answer the question using only the numbered sources, in one to three complete sentences "
    "(a bare Yes or No is not an answer). End every sentence with the numbers of the sources it "
    "comes from, in brackets, like [1] or [2][3]. Copy names, numbers and commands exactly as "
    "the sources write them. Say nothing the sources do not say. If the sources do not contain "
    "the answer, say only: The sources do not say."
)

# A backslash before markdown punctuation ("foreign\_keys", "--\[no-\]guess") is an escape
# the reader must not see: a copied command would be wrong.
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~=])")
_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_HEADING = re.compile(r"^\s*#{1,6}\s+", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z0-9])")
_WORD = re.compile(r"\w+")
# Paragraphs, and each list item, heading, table row or code line: a line that is no block
# of its own continues its paragraph (wrapped text).
_BLOCK = re.compile(r"\n\s*\n|\n(?=\s*(?:(?:[-*+]|\d+[.)]|#{1,6})(?:\s|$)|\||```|~~~))")


@dataclass(frozen=True)
class Synthesis:
    """What the LLM answered, and the check's verdict on it."""

    text: str
    verdict: grounding.Verdict


def unescaped(text: str) -> str:
    """`text` without markdown backslash escapes (the extractor should leave none; this is the
    last guard before a person or a model reads it)."""
    return _ESCAPE.sub(r"\1", text)


def plain(text: str) -> str:
    """A passage as prose a person reads: no escapes, fences, emphasis, heading or list marks;
    table rows as cells joined by semicolons."""
    text = _FENCE.sub("", unescaped(text))
    text = _TABLE_RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _BULLET.sub("", text)
    text = text.replace("`", "")
    text = _EMPHASIS.sub("", text)
    lines = []
    for line in text.splitlines():
        if line.strip().startswith("|"):
            line = "; ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
        lines.append(line)
    return "\n".join(lines)


def sources(hits: Sequence[SearchHit], relevance: Sequence[float], ratio: float) -> list[SearchHit]:
    """The hits an answer may cite: the best, and each other whose relevance (by hit) is at
    least `ratio` times the best's. A passage far below the best is what the ranking had left,
    not a source: on a site of three pages, the two unrelated pages came back as [2] and [3]
    at 0.06 and 0 of a fused 2.0. When no relevance is above 0 there is no scale to be far
    below on, and every hit is a source."""
    best = max(relevance, default=0.0)
    if best <= 0:
        return list(hits)
    return [h for h, r in zip(hits, relevance, strict=True) if r >= ratio * best]


def numbered_sources(passages: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {unescaped(p)}" for i, p in enumerate(passages, start=1))


def prompt(query: str, passages: Sequence[str]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": ANSWER_INSTRUCTIONS},
        {
            "role": "user",
            "content": f"Sources:\n{numbered_sources(passages)}\n\nQuestion: {unescaped(query)}",
        },
    ]


def extractive(query: str, passages: Sequence[str], *, why: str = NO_LLM) -> str:
    """Whole sentences of each of the best passages, from the one that shares most words with
    the query, numbered as the passages are; `why` says why this answer quotes."""
    if not passages:
        return NOTHING_FOUND
    lines = [f"{why}:"]
    for number, passage in enumerate(passages[:QUOTED_PASSAGES], start=1):
        lines.append(f"[{number}] {best_sentences(query, passage)}")
    return "\n".join(lines)


async def synthesised(llm: Chat, query: str, passages: Sequence[str]) -> Synthesis:
    """The model's answer (the configured LLM's, or the caller's own) from the numbered
    passages, and whether it is grounded in them."""
    text = unescaped(
        (await llm.complete(prompt(query, passages), max_tokens=ANSWER_TOKENS)).strip()
    )
    plain_passages = [unescaped(p) for p in passages]
    return Synthesis(text, grounding.check(query, text, plain_passages))


def best_sentences(query: str, passage: str, count: int = SENTENCES_PER_PASSAGE) -> str:
    """`count` whole sentences of `passage` in a row, from the one sharing most content words
    with `query` (the next often completes it: "X is limited by Y. Its default is 10."); headings
    are titles, not answers, and are never quoted."""
    words = grounding.content_stems(query)
    sentences = [
        sentence
        for block in _BLOCK.split(passage)
        if not _HEADING.match(block)
        for sentence in _SENTENCE_END.split(" ".join(plain(block).split()))
        if _WORD.search(sentence)
    ]
    if not sentences:
        return " ".join(plain(passage).split())
    best = max(
        range(len(sentences)),
        key=lambda i: (len(words & grounding.content_stems(sentences[i])), -i),
    )
    end = min(best + count, len(sentences))
    if sentences[end - 1].endswith(":"):
        end = min(end + LIST_ITEMS_QUOTED, len(sentences))
    return " ".join(sentences[best:end])
