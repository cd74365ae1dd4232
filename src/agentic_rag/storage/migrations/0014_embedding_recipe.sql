-- Which text a space's vectors were made from (chunking.EMBEDDING_RECIPE). Spaces made before
-- this embedded each chunk's heading path and text, without its document's title: they are
-- 'headings', and a store that holds one is refused until `agentic-rag reembed` re-embeds it,
-- as a store of another model is (vectors of two recipes are never searched together).
ALTER TABLE embedding_spaces ADD COLUMN recipe text NOT NULL DEFAULT 'headings';
ALTER TABLE embedding_spaces ALTER COLUMN recipe DROP DEFAULT;
