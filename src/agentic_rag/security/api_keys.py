"""API keys: `ar_<id>_<secret>`, bound to a tenant, scopes and optionally groups of tools,
stored as a hash.

The secret is 256 random bits, so a plain SHA-256 of it is as strong as a slow password hash
would be (slow hashes protect low-entropy secrets); it also keeps verification cheap on
every request. The id is public and lets one key be listed and revoked.
"""

import hashlib
import hmac
import secrets
import time
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from agentic_rag.config import ToolGroup
from agentic_rag.security.principal import ALL_SCOPES, Principal
from agentic_rag.storage.pool import Pool

PREFIX = "ar"
CACHE_SECONDS = 5.0  # how long a verified key is trusted without asking the database again


@dataclass(frozen=True)
class ApiKey:
    id: str
    tenant: str
    scopes: tuple[str, ...]
    name: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    groups: tuple[str, ...] | None = None
    """The groups of tools it selects (skills/groups.py); None: every group offered."""

    @property
    def active(self) -> bool:
        now = datetime.now(self.created_at.tzinfo)
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def parse_key(presented: str) -> tuple[str, str] | None:
    """The (id, secret) of a key in our format, or None."""
    prefix, _, rest = presented.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id.isalnum() or len(secret) < 32:
        return None
    return key_id, secret


def checked_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """The scopes of a key, sorted, once each; ValueError for one that does not exist."""
    checked = tuple(sorted(set(scopes)))
    unknown = set(checked) - ALL_SCOPES
    if unknown:
        raise ValueError(f"unknown scopes {sorted(unknown)}; use {sorted(ALL_SCOPES)}")
    return checked


def checked_groups(groups: Iterable[str] | None) -> tuple[str, ...] | None:
    """The groups of a key, sorted, once each (None stays None: no selection); ValueError for
    one that does not exist or for an empty selection, which would leave the key no tool."""
    if groups is None:
        return None
    checked = tuple(sorted(set(groups)))
    known = set(typing.get_args(ToolGroup))
    unknown = set(checked) - known
    if unknown:
        raise ValueError(f"unknown tool groups {sorted(unknown)}; use {sorted(known)}")
    if not checked:
        raise ValueError("name at least one tool group, or none at all for every group")
    return checked


def is_tenant_name(tenant: str) -> bool:
    """Whether `tenant` is a name an API key's tenant may have (letters, digits, '-', '_'):
    one path component too (a JWT's tenant may be any text)."""
    return bool(tenant) and tenant.replace("-", "").replace("_", "").isalnum()


def check_tenant(tenant: str) -> None:
    if not is_tenant_name(tenant):
        raise ValueError("a tenant is letters, digits, '-' and '_'")


class ApiKeyStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        # key id -> (when verified, secret hash, principal)
        self._verified: dict[str, tuple[float, bytes, Principal]] = {}

    async def create(
        self,
        tenant: str,
        scopes: Iterable[str],
        *,
        name: str = "",
        expires_at: datetime | None = None,
        groups: Iterable[str] | None = None,
    ) -> tuple[str, ApiKey]:
        """Create a key; return the full key (shown once) and its record. `groups`: the
        groups of tools it may see and call over MCP (None: every group offered)."""
        scopes = checked_scopes(scopes)
        tool_groups = checked_groups(groups)
        check_tenant(tenant)
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        row = await self._pool.fetchrow(
            "INSERT INTO api_keys (id, tenant, scopes, secret_hash, name, expires_at, groups)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
            key_id,
            tenant,
            list(scopes),
            _hash(secret),
            name,
            expires_at,
            None if tool_groups is None else list(tool_groups),
        )
        assert row is not None
        return f"{PREFIX}_{key_id}_{secret}", _record(row)

    async def list(self, tenant: str | None = None) -> list[ApiKey]:
        rows = await self._pool.fetch(
            "SELECT * FROM api_keys WHERE $1::text IS NULL OR tenant = $1 ORDER BY created_at",
            tenant,
        )
        return [_record(r) for r in rows]

    async def revoke(self, key_id: str) -> bool:
        status: str = await self._pool.execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", key_id
        )
        self._verified.pop(key_id, None)
        return status != "UPDATE 0"

    async def any_active(self) -> bool:
        exists: bool = await self._pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > now()))"
        )
        return exists

    async def verify(self, presented: str) -> Principal | None:
        """The principal of a valid, active key; None for anything else."""
        parsed = parse_key(presented)
        if parsed is None:
            return None
        key_id, secret = parsed
        cached = self._verified.get(key_id)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            _, secret_hash, principal = cached
            return principal if hmac.compare_digest(secret_hash, _hash(secret)) else None
        row = await self._pool.fetchrow(
            "SELECT * FROM api_keys WHERE id = $1 AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > now())",
            key_id,
        )
        if row is None or not hmac.compare_digest(bytes(row["secret_hash"]), _hash(secret)):
            return None
        groups = row["groups"]
        principal = Principal(
            row["tenant"],
            key_id,
            frozenset(row["scopes"]),
            "api-key",
            None if groups is None else frozenset(groups),
        )
        self._verified[key_id] = (time.monotonic(), bytes(row["secret_hash"]), principal)
        return principal


def _record(row: asyncpg.Record) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant=row["tenant"],
        scopes=tuple(row["scopes"]),
        name=row["name"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        groups=None if row["groups"] is None else tuple(row["groups"]),
    )
