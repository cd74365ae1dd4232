"""Answers with numbered citations: synthesised by the LLM when one is configured, otherwise
extractive (the best passages, quoted, saying that no LLM is configured)."""

import re
from collections.abc import Sequence

from agentic_rag.llm.chat import OpenAIChat

NO_LLM = "No LLM is configured, so this answer quotes the best passages"
NOTHING_FOUND = "Nothing in the knowledge base matches this question."
QUOTE_CHARACTERS = 400
QUOTED_PASSAGES = 3

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")  # sentences, and headings apart
_WORD = re.compile(r"\w+")

ANSWER_INSTRUCTIONS = (
    "Answer the question using only the numbered sources. Cite every claim with the number of "
    "its source in brackets, like [1] or [2][3]. If the sources do not contain the answer, say "
    "so plainly. Be concise."
)


def numbered_sources(passages: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))


def extractive(query: str, passages: Sequence[str]) -> str:
    """Quote the part of each of the best passages that shares most words with the query."""
    if not passages:
        return NOTHING_FOUND
    lines = [f"{NO_LLM}:"]
    for number, passage in enumerate(passages[:QUOTED_PASSAGES], start=1):
        lines.append(f"[{number}] {_best_excerpt(query, passage)}")
    return "\n".join(lines)


async def synthesised(llm: OpenAIChat, query: str, passages: Sequence[str]) -> str:
    if not passages:
        return NOTHING_FOUND
    return await llm.complete(
        [
            {"role": "system", "content": ANSWER_INSTRUCTIONS},
            {
                "role": "user",
                "content": f"Sources:\n{numbered_sources(passages)}\n\nQuestion: {query}",
            },
        ]
    )


def _best_excerpt(query: str, passage: str) -> str:
    words = {w.lower() for w in _WORD.findall(query)}
    sentences = [s for s in _SENTENCE.split(passage.strip()) if s]
    if not sentences:
        return passage[:QUOTE_CHARACTERS]
    best = max(
        range(len(sentences)),
        key=lambda i: (len(words & {w.lower() for w in _WORD.findall(sentences[i])}), -i),
    )
    excerpt = " ".join(sentences[best:])
    if len(excerpt) > QUOTE_CHARACTERS:
        excerpt = excerpt[:QUOTE_CHARACTERS].rsplit(" ", 1)[0] + " ..."
    return excerpt
