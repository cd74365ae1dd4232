-- The agent network: the peers each tenant registered, their health, and the sessions (A2A
-- contexts) with their participants and the delegations they reference.

CREATE TABLE peers (
    tenant            text        NOT NULL,
    id                text        NOT NULL,
    name              text        NOT NULL,
    endpoint          text        NOT NULL,  -- where JSON-RPC requests are POSTed
    protocol_version  text        NOT NULL,
    card              jsonb,                 -- as fetched or given; NULL for REST declarations
    card_url          text,
    skills            jsonb       NOT NULL,  -- [PeerSkill]
    capabilities      text[]      NOT NULL,  -- every skill's id, name and tags: what `find` matches
    security          jsonb       NOT NULL,  -- the card's security requirements
    health            text        NOT NULL,  -- healthy, unhealthy, unknown
    last_heartbeat    timestamptz,           -- the last heartbeat the peer sent (NULL: it is probed)
    last_seen         timestamptz,           -- the last heartbeat or successful probe
    next_probe_at     timestamptz NOT NULL DEFAULT now(),
    probe_failures    integer     NOT NULL DEFAULT 0,
    health_changed_at timestamptz NOT NULL DEFAULT now(),
    registered_at     timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
-- One record per endpoint and tenant: registering the same agent again updates it.
CREATE UNIQUE INDEX peers_by_endpoint ON peers (tenant, endpoint);
CREATE INDEX peers_capabilities ON peers USING gin (capabilities);

CREATE TABLE sessions (
    tenant         text        NOT NULL,
    context_id     text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_activity  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, context_id)
);
CREATE INDEX sessions_by_activity ON sessions (tenant, last_activity);

-- Who sent messages in a session: callers (by credential subject) and peers (by peer id).
CREATE TABLE session_participants (
    tenant       text        NOT NULL,
    context_id   text        NOT NULL,
    kind         text        NOT NULL,  -- caller or peer
    participant  text        NOT NULL,
    first_seen   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, context_id, kind, participant),
    FOREIGN KEY (tenant, context_id) REFERENCES sessions ON DELETE CASCADE
);

-- The delegations a session references (its tasks are those of the context in `tasks`).
CREATE TABLE session_delegations (
    tenant      text        NOT NULL,
    context_id  text        NOT NULL,
    task_id     text        NOT NULL,  -- the local task of the delegation
    peer_id     text,                  -- the peer it went to, once known
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, context_id, task_id),
    FOREIGN KEY (tenant, context_id) REFERENCES sessions ON DELETE CASCADE
);
