-- Delegation and orchestration (docs/network.md). Every row belongs to a tenant.

-- A task handed to a peer: its id is the local A2A task's (the correlation id). The remote
-- task's id is stored as soon as the peer accepts it, so a restart follows it instead of
-- sending the message again.
CREATE TABLE delegations (
    tenant             text        NOT NULL,
    id                 text        NOT NULL,
    capability         text        NOT NULL,
    target             text        NOT NULL,  -- a peer id, or 'best'
    request            jsonb       NOT NULL,  -- the DelegationRequest as accepted
    deadline           timestamptz NOT NULL,  -- kept across restarts: a timeout is not reset
    state              text        NOT NULL,  -- placing, following, completed, failed, canceled
    peer_id            text,                  -- the peer that accepted it
    remote_task_id     text,
    remote_context_id  text,
    remote_state       text,
    passed_over        jsonb       NOT NULL DEFAULT '[]',  -- [peer id, why] of peers that never accepted
    result             jsonb,
    error              text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);

-- An orchestration: its plan (given, or decomposed from the goal by the LLM) and each step's
-- state. Its id is the `orchestrate` task's; each step runs as a task of its own.
CREATE TABLE plans (
    tenant      text        NOT NULL,
    id          text        NOT NULL,
    goal        text        NOT NULL,
    plan        jsonb       NOT NULL,
    state       text        NOT NULL,  -- running, completed, failed, canceled
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);

CREATE TABLE plan_steps (
    tenant      text        NOT NULL,
    plan_id     text        NOT NULL,
    step_id     text        NOT NULL,
    state       text        NOT NULL,  -- pending, running, completed, failed, canceled
    task_id     text,                  -- the step's task, once started
    attempt     integer     NOT NULL DEFAULT 0,
    output      jsonb,
    error       text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, plan_id, step_id),
    FOREIGN KEY (tenant, plan_id) REFERENCES plans ON DELETE CASCADE
);
