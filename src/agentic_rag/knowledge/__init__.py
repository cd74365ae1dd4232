"""The knowledge engine: documents, chunks, embeddings, retrieval, ingestion."""
