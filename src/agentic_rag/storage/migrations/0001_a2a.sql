-- A2A tasks: the current snapshot per task, the replayable event log, push configs, contexts.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE contexts (
    tenant      text        NOT NULL,
    id          text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);

CREATE TABLE tasks (
    tenant      text        NOT NULL,
    id          text        NOT NULL,
    context_id  text        NOT NULL,
    state       text        NOT NULL,
    last_seq    bigint      NOT NULL,
    task        jsonb       NOT NULL,  -- the A2A Task, whole history included
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
CREATE INDEX tasks_by_context ON tasks (tenant, context_id);
CREATE INDEX tasks_unfinished ON tasks (state) WHERE state IN ('submitted', 'working');

CREATE TABLE task_events (
    tenant      text        NOT NULL,
    task_id     text        NOT NULL,
    seq         bigint      NOT NULL,
    kind        text        NOT NULL,  -- task, status-update, artifact-update or message
    final       boolean     NOT NULL,  -- ends a stream cycle
    event       jsonb       NOT NULL,  -- the A2A object as it goes on the wire
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, task_id, seq)
);

CREATE TABLE push_configs (
    tenant      text        NOT NULL,
    task_id     text        NOT NULL,
    config_id   text        NOT NULL,
    config      jsonb       NOT NULL,  -- a PushNotificationConfig
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, task_id, config_id)
);

-- Keys that sign push notifications; the public halves are served at /.well-known/jwks.json.
CREATE TABLE signing_keys (
    kid          text        PRIMARY KEY,
    private_pem  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
