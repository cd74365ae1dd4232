-- One copy of each document: the same page reached under two sources (two crawls from two start
-- pages, a redirect, a canonical link) or the same text at two URLs is stored once, and each
-- source that reached it holds it through this table. `documents.source_id` is the source that
-- stored it first (any other holder takes it over when that source is deleted); a document
-- goes when no source holds it any more.
CREATE TABLE source_documents (
    tenant       text        NOT NULL,
    source_id    text        NOT NULL,
    uri          text        NOT NULL,  -- the URL (after redirects) or name the source reached it by
    document_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, source_id, uri),
    FOREIGN KEY (tenant, source_id) REFERENCES knowledge_sources ON DELETE CASCADE,
    FOREIGN KEY (tenant, document_id) REFERENCES documents ON DELETE CASCADE
);
CREATE INDEX source_documents_by_document ON source_documents (tenant, document_id);

INSERT INTO source_documents (tenant, source_id, uri, document_id)
SELECT tenant, source_id, uri, id FROM documents;

-- A document's URI no longer says which source reached it: source_documents does.
ALTER TABLE documents DROP CONSTRAINT documents_tenant_source_id_uri_key;
-- How an ingestion finds the copy it already has: the same text, or the same page.
CREATE INDEX documents_by_content ON documents (tenant, content_hash);
CREATE INDEX documents_by_uri ON documents (tenant, uri);

-- A source exists once it holds a document: those that failed ingestions left empty go.
DELETE FROM knowledge_sources s
WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.tenant = s.tenant AND d.source_id = s.id);
