-- Which text a space's vectors were made from (chunking.EMBEDDING_RECIPE). Spaces made before
-- this embedded each chunk's heading path and text only: they are 'headings', and a store that
-- holds one is refused until `agentic-rag reembed` re-embeds it, as a store of another model is
-- (vectors of two recipes are never searched together).
ALTER TABLE embedding_spaces ADD COLUMN recipe text NOT NULL DEFAULT 'headings';
ALTER TABLE embedding_spaces ALTER COLUMN recipe DROP DEFAULT;

-- A vector per document and space, made from its title and opening words
-- (chunking.document_embedding_text): the dense leg adds a share of its similarity to that of
-- the document's chunks (store.dense).
CREATE TABLE document_embeddings (
    space        integer  NOT NULL REFERENCES embedding_spaces ON DELETE CASCADE,
    tenant       text     NOT NULL,
    document_id  text     NOT NULL,
    embedding    vector   NOT NULL,
    PRIMARY KEY (space, tenant, document_id),
    FOREIGN KEY (tenant, document_id) REFERENCES documents ON DELETE CASCADE
);
