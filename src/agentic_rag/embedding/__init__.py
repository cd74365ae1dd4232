"""Text embeddings, below the knowledge engine and the graph that both embed text."""
