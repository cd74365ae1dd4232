-- The graph's episode queue (docs/graph.md): add_memory stores an episode here and answers; a
-- worker of any process claims it (FOR UPDATE SKIP LOCKED), marks it with its worker id (its
-- lease is that worker's advisory lock, as for tasks), extracts it into the graph, and records
-- the outcome and what the LLM cost. Episodes of one namespace are processed in `seq` order.
CREATE TABLE graph_episodes (
    tenant text NOT NULL,
    uuid text NOT NULL,
    seq bigserial NOT NULL UNIQUE,
    namespace text NOT NULL,             -- the namespace's graph (Namespace.graph)
    sub_group text,                      -- NULL: the tenant's main graph
    arguments jsonb NOT NULL,            -- add_memory's arguments, as given
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'processing', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    worker integer,                      -- the worker processing it (its lease)
    not_before timestamptz NOT NULL DEFAULT now(),  -- the next try, after a failed one
    error text,                          -- the last failure's reason
    llm_calls integer NOT NULL DEFAULT 0,
    prompt_tokens bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    llm_seconds double precision NOT NULL DEFAULT 0,
    seconds double precision NOT NULL DEFAULT 0,  -- processing time, every attempt
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (tenant, uuid)
);

-- The unfinished episodes of a namespace, in order: what a claim looks at.
CREATE INDEX graph_episodes_pending ON graph_episodes (namespace, seq)
    WHERE state IN ('queued', 'processing');
