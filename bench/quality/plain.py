"""The dense leg against its own model used plainly (issue 17, point 14), and the ways of
ranking documents from the stored vectors that were measured to close the gap.

- **Plain model**: each document's text cut into windows of 150 words, each window prefixed
  with the document's title, embedded by the same LocalEmbedder (int8 ONNX MiniLM); a document
  scores its best window. Its vectors are cached in `bench/.work/quality/`, keyed by the
  windows' texts and the model.
- **Options** (the harness's exact numpy search over the product's chunk vectors): a document
  scores its best chunk plus `w` times the similarity of a document-level vector, either the
  mean of its chunk vectors or the embedding of its first plain window; or its best chunk plus
  `w` times its second best. `w` is chosen on the tuning half and reported on both halves.

Each method is a ranked list of ids whose documents `Run.document_of` knows: windows get
negative ids, so that every method is scored as the product is (a document at its best id).
"""

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

import corpus
import numpy as np

from agentic_rag.embedding.embedders import LocalEmbedder
from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.sources.markdown import markdown_sections

WINDOW_WORDS = 150
PLAIN = "plain model: title + 150-word windows, best window"
WEIGHTS = (0.1, 0.2, 0.3, 0.5, 1.0)
CACHE = corpus.CACHE.parent


def windows(documents: Sequence[corpus.Document]) -> tuple[list[str], list[str]]:
    """(texts, document names): every document's stored text in windows of WINDOW_WORDS
    words, each after the document's title."""
    texts, names = [], []
    for document in documents:
        sections = markdown_sections(document.markdown)
        name, title = document.entry.name, document.title
        text = ExtractedDocument(name, title, "text/markdown", sections).text
        words = text.split()
        for start in range(0, len(words), WINDOW_WORDS):
            texts.append(f"{title}\n" + " ".join(words[start : start + WINDOW_WORDS]))
            names.append(name)
    return texts, names


async def embed_cached(embedder: LocalEmbedder, texts: list[str]) -> tuple[np.ndarray, bool]:
    """Vectors of `texts` and whether they came from the cache."""
    key = hashlib.sha256(json.dumps([embedder.name, texts]).encode()).hexdigest()[:24]
    cached = CACHE / f"plain-windows-{key}.npy"
    if cached.exists():
        return np.load(cached), True
    vectors = np.concatenate(
        [await embedder.embed(texts[i : i + 512]) for i in range(0, len(texts), 512)]
    ).astype(np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(cached, vectors)
    return vectors, False


class DocumentScores:
    """Per query and document: the best and second best chunk similarity, the best chunk's
    id, and document-level vectors' similarities."""

    def __init__(
        self,
        chunk_vectors: np.ndarray,
        chunk_ids: Sequence[int],
        document_of: dict[int, str],
        query_vectors: np.ndarray,
    ) -> None:
        self.names = sorted({document_of[c] for c in chunk_ids})
        column = {name: i for i, name in enumerate(self.names)}
        of_chunk = np.array([column[document_of[c]] for c in chunk_ids])
        similarity = query_vectors @ chunk_vectors.T  # queries x chunks
        n_queries, n_docs = len(query_vectors), len(self.names)
        self.best = np.full((n_queries, n_docs), -np.inf)
        self.second = np.full((n_queries, n_docs), -np.inf)
        best_chunk = np.zeros((n_queries, n_docs), dtype=np.int64)
        for j in range(len(chunk_ids)):
            d, s = of_chunk[j], similarity[:, j]
            better = s > self.best[:, d]
            self.second[:, d] = np.where(better, self.best[:, d], np.maximum(self.second[:, d], s))
            best_chunk[:, d] = np.where(better, j, best_chunk[:, d])
            self.best[:, d] = np.where(better, s, self.best[:, d])
        self.second = np.where(np.isinf(self.second), self.best, self.second)  # one chunk
        ids = np.asarray(chunk_ids)
        self.best_chunk = ids[best_chunk]  # queries x documents
        centroids = np.zeros((n_docs, chunk_vectors.shape[1]))
        np.add.at(centroids, of_chunk, chunk_vectors)
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        self.centroid = query_vectors @ centroids.T
        self.column = column

    def first_window(
        self, window_vectors: np.ndarray, window_names: Sequence[str], query_vectors: np.ndarray
    ) -> np.ndarray:
        first: dict[str, int] = {}
        for i, name in enumerate(window_names):
            first.setdefault(name, i)
        vectors = np.stack([window_vectors[first[name]] for name in self.names])
        return np.asarray(query_vectors @ vectors.T)

    def ranked(self, scores: np.ndarray, depth: int) -> list[list[int]]:
        """Each query's documents by `scores`, as their best chunks (the product's unit)."""
        out = []
        for q, row in enumerate(scores):
            top = np.argpartition(-row, depth)[:depth]
            top = top[np.lexsort((top, -row[top]))]
            out.append([int(self.best_chunk[q, d]) for d in top])
        return out


def options(scores: DocumentScores, first_window: np.ndarray) -> dict[str, np.ndarray]:
    """Every option's document scores (queries x documents), by name."""
    out = {"best chunk alone (as the product ranked before)": scores.best}
    for w in WEIGHTS:
        out[f"best chunk + {w:g} x document centroid"] = scores.best + w * scores.centroid
        out[f"best chunk + {w:g} x first plain window"] = scores.best + w * first_window
        out[f"best chunk + {w:g} x second best chunk"] = scores.best + w * scores.second
    return out


OPTION = "dense option: "


async def measure(
    run: Any,
    documents: Sequence[corpus.Document],
    embedder: LocalEmbedder,
    chunk_vectors: np.ndarray,
    chunk_ids: Sequence[int],
    query_vectors: np.ndarray,
    depth: int,
) -> dict[str, Any]:
    """Adds the plain model and every option to `run.ranked`; returns what the report needs."""
    texts, names = windows(documents)
    started = time.perf_counter()
    window_vectors, from_cache = await embed_cached(embedder, texts)
    seconds = time.perf_counter() - started
    window_ids = [-(i + 1) for i in range(len(texts))]
    run.document_of.update(zip(window_ids, names, strict=True))
    similarity = query_vectors @ window_vectors.T
    run.ranked[PLAIN] = []
    for row in similarity:
        top = np.argpartition(-row, depth)[:depth]
        top = top[np.lexsort((top, -row[top]))]
        run.ranked[PLAIN].append([window_ids[i] for i in top])
    scores = DocumentScores(chunk_vectors, chunk_ids, run.document_of, query_vectors)
    first = scores.first_window(window_vectors, names, query_vectors)
    option_names = []
    for name, values in options(scores, first).items():
        run.ranked[OPTION + name] = scores.ranked(values, depth)
        option_names.append(OPTION + name)
    return {
        "windows": len(texts),
        "windows_over_the_model_limit": sum(
            embedder.count_tokens(t) > embedder.max_tokens for t in texts
        ),
        "window_embed_s": 0.0 if from_cache else seconds,
        "window_vectors_from_cache": from_cache,
        "options": option_names,
    }
