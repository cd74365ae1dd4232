-- The HNSW index of each active embedding space, rebuilt over half-precision vectors with a
-- denser graph (knowledge/store.py, _create_hnsw_index): half the pages per search, and
-- recall@10 0.96 at a million chunks, p95 23 ms (bench/results/knowledge-hnsw.md).
-- The vectors themselves stay full precision; exact scans and scores read those.
DO $$
DECLARE
    space record;
BEGIN
    -- The graph of a million vectors is built in memory (about 1.7 GB), not on disk.
    PERFORM set_config('maintenance_work_mem', '3GB', true);
    FOR space IN SELECT id, dimension FROM embedding_spaces WHERE state = 'active' LOOP
        EXECUTE format('DROP INDEX IF EXISTS chunk_embeddings_hnsw_%s', space.id);
        EXECUTE format(
            'CREATE INDEX chunk_embeddings_hnsw_%s ON chunk_embeddings '
            'USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) '
            'WITH (m = 24, ef_construction = 128) WHERE space = %s',
            space.id, space.dimension, space.id);
    END LOOP;
END $$;
