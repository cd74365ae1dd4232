-- API keys: each bound to a tenant and scopes; only a hash of the secret is stored.
CREATE TABLE api_keys (
    id           text        PRIMARY KEY,           -- public part of the key, shown in lists
    tenant       text        NOT NULL,
    scopes       text[]      NOT NULL,
    secret_hash  bytea       NOT NULL,              -- sha256 of the secret part
    name         text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant);
