-- The knowledge engine: sources, documents, chunks, their embeddings, the lexicon behind the
-- BM25 leg, ingestion jobs and retrieval trajectories. Every row belongs to a tenant.
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- What a caller asked to ingest: a site, a PDF, a video, a text.
CREATE TABLE knowledge_sources (
    tenant      text        NOT NULL,
    id          text        NOT NULL,
    kind        text        NOT NULL,  -- url, pdf, youtube, text
    uri         text        NOT NULL,  -- the start URL, file name, video URL or text title
    title       text        NOT NULL DEFAULT '',
    metadata    jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id),
    UNIQUE (tenant, kind, uri)
);

-- One page, file or transcript as extracted; chunk spans are offsets into `text`.
CREATE TABLE documents (
    tenant         text        NOT NULL,
    id             text        NOT NULL,
    source_id      text        NOT NULL,
    uri            text        NOT NULL,  -- the URL after redirects, or the file name
    title          text        NOT NULL,
    mime_type      text        NOT NULL,
    content_hash   bytea       NOT NULL,  -- sha256 of `text`: unchanged content is not rewritten
    text           text        NOT NULL,
    metadata       jsonb       NOT NULL DEFAULT '{}',
    notes          text[]      NOT NULL DEFAULT '{}',
    etag           text,                  -- validators for conditional re-fetches
    last_modified  text,
    links          text[]      NOT NULL DEFAULT '{}',  -- a page's links, followed when unchanged
    fetched_at     timestamptz NOT NULL DEFAULT now(),
    chunk_count    integer     NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id),
    UNIQUE (tenant, source_id, uri),
    FOREIGN KEY (tenant, source_id) REFERENCES knowledge_sources ON DELETE CASCADE
);

CREATE TABLE chunks (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant         text        NOT NULL,
    document_id    text        NOT NULL,
    position       integer     NOT NULL,
    text           text        NOT NULL,
    char_start     integer     NOT NULL,
    char_end       integer     NOT NULL,
    page           integer,
    start_seconds  real,
    end_seconds    real,
    heading_path   text[]      NOT NULL DEFAULT '{}',
    embedding_prefix text      NOT NULL DEFAULT '',  -- read before the text when embedding
    tsv            tsvector    NOT NULL,  -- headings and text, for the lexical leg
    term_count     integer     NOT NULL,  -- BM25's document length
    UNIQUE (tenant, document_id, position),
    FOREIGN KEY (tenant, document_id) REFERENCES documents ON DELETE CASCADE
);
-- Tenant first in the same GIN index: a term's postings are read for one tenant only.
CREATE INDEX chunks_lexical ON chunks USING gin (tenant, tsv);

-- An embedding model's vectors form a space; searches read the active one. Re-embedding fills
-- a new space while the old one serves, then switches in one transaction.
CREATE TABLE embedding_spaces (
    id          integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model       text        NOT NULL,
    dimension   integer     NOT NULL,
    state       text        NOT NULL,  -- building, active
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX embedding_spaces_one_active ON embedding_spaces ((true)) WHERE state = 'active';

-- Each space gets its HNSW index when it is created (its dimension is known only then):
--   CREATE INDEX chunk_embeddings_hnsw_<space> ON chunk_embeddings
--     USING hnsw ((embedding::vector(<dimension>)) vector_cosine_ops) WHERE space = <space>
-- (0010 rebuilt them over half-precision vectors.)
CREATE TABLE chunk_embeddings (
    space      integer  NOT NULL REFERENCES embedding_spaces ON DELETE CASCADE,
    chunk_id   bigint   NOT NULL REFERENCES chunks ON DELETE CASCADE,
    tenant     text     NOT NULL,
    embedding  vector   NOT NULL,
    PRIMARY KEY (space, chunk_id)
);
CREATE INDEX chunk_embeddings_by_tenant ON chunk_embeddings (space, tenant);

-- Document frequencies per tenant: the IDF of BM25, and which query terms are rare enough to
-- select candidates by (PostgreSQL's ts_rank has no IDF).
CREATE TABLE lexicon (
    tenant  text    NOT NULL,
    lexeme  text    NOT NULL,
    df      integer NOT NULL,
    PRIMARY KEY (tenant, lexeme)
);
CREATE TABLE lexicon_totals (
    tenant  text    PRIMARY KEY,
    chunks  bigint  NOT NULL,
    terms   bigint  NOT NULL  -- sum of term_count: the average document length is terms / chunks
);

-- Long ingestions: one row per job, whichever protocol started it (its id is the A2A task's).
CREATE TABLE ingest_jobs (
    tenant       text        NOT NULL,
    id           text        NOT NULL,
    kind         text        NOT NULL,  -- url, pdf, youtube, text
    request_key  bytea       NOT NULL,  -- sha256 of kind and arguments: a retry finds the running job
    arguments    jsonb       NOT NULL,
    state        text        NOT NULL,  -- running, completed, failed, canceled
    progress     jsonb       NOT NULL DEFAULT '{}',
    summary      jsonb,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX ingest_jobs_one_running ON ingest_jobs (tenant, request_key)
    WHERE state = 'running';

-- A crawl's frontier and what became of each page: a resumed crawl fetches no page twice.
CREATE TABLE ingest_job_pages (
    tenant       text    NOT NULL,
    job_id       text    NOT NULL,
    url          text    NOT NULL,
    depth        integer NOT NULL,
    seq          bigint  GENERATED ALWAYS AS IDENTITY,
    state        text    NOT NULL,  -- queued, ingested, unchanged, skipped, failed
    reason       text,
    document_id  text,
    PRIMARY KEY (tenant, job_id, url),
    FOREIGN KEY (tenant, job_id) REFERENCES ingest_jobs ON DELETE CASCADE
);
CREATE INDEX ingest_job_pages_queued ON ingest_job_pages (tenant, job_id, seq)
    WHERE state = 'queued';

-- What each retrieval did, for explain_answer.
CREATE TABLE retrievals (
    tenant      text        NOT NULL,
    id          text        NOT NULL,
    query       text        NOT NULL,
    trace       jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
