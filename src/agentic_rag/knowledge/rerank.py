"""Rerankers: reorder fused candidates before the top k are kept.

- `mmr`: maximal marginal relevance over the candidates' vectors (diversity; no model);
- `cross-encoder`: an ONNX cross-encoder from a configured local directory (`model.onnx` and
  `tokenizer.json`), scoring each (query, passage) pair;
- `llm`: the configured LLM (or the caller's own model, asked for) grades each passage.
`rrf` needs no reranker: it is the fusion itself.
"""

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from agentic_rag.llm.chat import Chat, LLMError


def mmr(
    relevance: Mapping[int, float],
    vectors: Mapping[int, np.ndarray],
    limit: int,
    *,
    diversity: float = 0.1,
) -> list[tuple[int, float]]:
    """Pick `limit` of the candidates (chunk id -> its fused score), each maximising
    (1 - diversity) * relevance - diversity * its greatest similarity to those already picked.
    Relevance is the fused score scaled to 0..1, so the lexical evidence counts too (the
    dense cosine alone loses to the fusion: bench/quality/results.md). Returns (chunk id, MMR
    score) in pick order."""
    pool = [c for c in relevance if c in vectors]
    if not pool:
        return []
    matrix = np.stack([vectors[c] for c in pool])
    scores_in = np.array([relevance[c] for c in pool], dtype=np.float64)
    spread = scores_in.max() - scores_in.min()
    scaled = (scores_in - scores_in.min()) / spread if spread > 0 else np.ones(len(pool))
    similarity = matrix @ matrix.T
    picked: list[int] = []
    scores: list[float] = []
    redundancy = np.zeros(len(pool))
    for _ in range(min(limit, len(pool))):
        value = (1 - diversity) * scaled - diversity * redundancy
        value[picked] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        scores.append(float(value[best]))
        redundancy = np.maximum(redundancy, similarity[best])
    return [(pool[i], s) for i, s in zip(picked, scores, strict=True)]


class CrossEncoder:
    """An ONNX cross-encoder read from `directory` (model.onnx, tokenizer.json)."""

    def __init__(self, directory: Path, *, max_tokens: int = 512) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        model, tokenizer = directory / "model.onnx", directory / "tokenizer.json"
        for path in (model, tokenizer):
            if not path.is_file():
                raise FileNotFoundError(f"cross-encoder directory {directory} has no {path.name}")
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def _score(self, query: str, passages: Sequence[str]) -> list[float]:
        encodings = self._tokenizer.encode_batch([(query, p) for p in passages])
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        (logits,) = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[
            :1
        ]
        return [float(x) for x in np.asarray(logits).reshape(len(passages), -1)[:, 0]]

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self._score, query, passages)


_LLM_GRADING = (
    "Grade how well each numbered passage answers the question, from 0 (unrelated) to 10 "
    '(answers it fully). Reply with a JSON object {"grades": {"<number>": <grade>, ...}} '
    "that grades every passage."
)


async def llm_grades(llm: Chat, query: str, passages: Sequence[str]) -> list[float]:
    """The LLM's 0-10 grade of each passage for `query`."""
    numbered = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    reply = await llm.complete(
        [
            {"role": "system", "content": _LLM_GRADING},
            {"role": "user", "content": f"Question: {query}\n\nPassages:\n{numbered}"},
        ],
        max_tokens=32 + 12 * len(passages),
        json_object=True,
    )
    match = re.search(r"\{.*\}", reply, re.DOTALL)
    try:
        grades = json.loads(match.group(0) if match else reply)["grades"]
        return [float(grades.get(str(i), 0.0)) for i in range(1, len(passages) + 1)]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LLMError(f"the LLM's grades are not the JSON asked for: {reply[:200]!r}") from None
