"""PeerRegistry: the peers of each tenant in PostgreSQL; all SQL of the `peers` table.

A peer's health is changed only by single UPDATE statements that say which change they make
(`WHERE health <> ...`), so when several workers judge at once, each change happens, and is
reported, exactly once.
"""

from dataclasses import asdict
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from agentic_rag.ids import new_id
from agentic_rag.network.cards import PeerDescription
from agentic_rag.network.peers import HealthStatus, Peer, PeerSkill
from agentic_rag.storage.pool import Pool

_COLUMNS = (
    "tenant, id, name, endpoint, protocol_version, card, card_url, skills, security, health, "
    "last_heartbeat, registered_at"
)
# Healthy first, then the most recently heard from.
_ORDER = (
    "ORDER BY CASE health WHEN 'healthy' THEN 0 WHEN 'unknown' THEN 1 ELSE 2 END, "
    "last_seen DESC NULLS LAST, registered_at DESC"
)


class PeerRegistry:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def register(
        self,
        tenant: str,
        description: PeerDescription,
        *,
        health: HealthStatus,
        heartbeat: bool = False,
    ) -> Peer:
        """Store the peer, or update the one at the same endpoint (keeping its id and
        registration time). `health` is what registration showed: `healthy` when the peer
        itself registered (then it counts as its first `heartbeat`: it is judged by its
        heartbeats from now on) or its card was just fetched, `unknown` for a card given
        inline. Peers that never sent a heartbeat are probed."""
        d = description
        capabilities = sorted({c for s in d.skills for c in (s.id, s.name, *s.tags)})
        row = await self._pool.fetchrow(
            "INSERT INTO peers (tenant, id, name, endpoint, protocol_version, card, card_url, "
            " skills, capabilities, security, health, last_heartbeat, last_seen) "
            "VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9, $10::jsonb, $11, "
            " CASE WHEN $12 THEN now() END, CASE WHEN $11 = 'healthy' THEN now() END) "
            "ON CONFLICT (tenant, endpoint) DO UPDATE SET name = excluded.name, "
            " protocol_version = excluded.protocol_version, card = excluded.card, "
            " card_url = excluded.card_url, skills = excluded.skills, "
            " capabilities = excluded.capabilities, security = excluded.security, "
            " health = excluded.health, "
            " last_heartbeat = coalesce(excluded.last_heartbeat, peers.last_heartbeat), "
            " last_seen = coalesce(excluded.last_seen, peers.last_seen), "
            " next_probe_at = now(), probe_failures = 0, updated_at = now(), "
            " health_changed_at = CASE WHEN peers.health = excluded.health "
            "  THEN peers.health_changed_at ELSE now() END "
            f"RETURNING {_COLUMNS}",
            tenant,
            new_id(),
            d.name,
            d.endpoint,
            d.protocol_version,
            _json(d.card),
            d.card_url,
            _json([asdict(s) for s in d.skills]),
            capabilities,
            _json(list(d.security)),
            health,
            heartbeat,
        )
        assert row is not None
        return _peer(row)

    async def get(self, tenant: str, peer_id: str) -> Peer | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM peers WHERE tenant = $1 AND id = $2", tenant, peer_id
        )
        return _peer(row) if row is not None else None

    async def find(
        self, tenant: str, capability: str | None = None, *, healthy_only: bool = True
    ) -> list[Peer]:
        """The tenant's peers offering `capability` (any, if None): healthy first, most
        recently heard from first."""
        rows = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM peers WHERE tenant = $1 "
            "AND ($2::text IS NULL OR $2 = ANY (capabilities)) "
            f"AND (NOT $3 OR health = 'healthy') {_ORDER}",
            tenant,
            capability,
            healthy_only,
        )
        return [_peer(r) for r in rows]

    async def remove(self, tenant: str, peer_id: str) -> bool:
        status = await self._pool.execute(
            "DELETE FROM peers WHERE tenant = $1 AND id = $2", tenant, peer_id
        )
        return status == "DELETE 1"

    async def heartbeat(self, tenant: str, peer_id: str) -> tuple[Peer, HealthStatus] | None:
        """Record a heartbeat: the peer as it is now, and its health before (None: no such
        peer)."""
        row = await self._pool.fetchrow(
            "UPDATE peers AS p SET last_heartbeat = now(), last_seen = now(), health = 'healthy', "
            " health_changed_at = CASE WHEN old.health = 'healthy' "
            "  THEN old.health_changed_at ELSE now() END "
            "FROM (SELECT tenant, id, health, health_changed_at FROM peers "
            "      WHERE tenant = $1 AND id = $2 FOR UPDATE) AS old "
            "WHERE p.tenant = old.tenant AND p.id = old.id "
            f"RETURNING {', '.join('p.' + c for c in _COLUMNS.split(', '))}, old.health AS before",
            tenant,
            peer_id,
        )
        if row is None:
            return None
        return _peer(row), row["before"]

    # -- what the health monitor uses -------------------------------------------------------

    async def mark_silent(self, silence: float) -> list[Peer]:
        """Mark unhealthy the peers not heard from (heartbeat or probe) for `silence` seconds;
        return those that changed."""
        rows = await self._pool.fetch(
            "UPDATE peers SET health = 'unhealthy', health_changed_at = now() "
            "WHERE health <> 'unhealthy' "
            "AND coalesce(last_seen, registered_at) < now() - make_interval(secs => $1) "
            f"RETURNING {_COLUMNS}",
            silence,
        )
        return [_peer(r) for r in rows]

    async def next_due(self, silence: float) -> float | None:
        """Seconds until the monitor has something to do: the soonest moment a peer that is not
        unhealthy will have been silent for `silence` seconds, or a probe is due; None if there
        are no peers to watch. Negative when overdue."""
        due: float | None = await self._pool.fetchval(
            "SELECT extract(epoch FROM least("
            " min(coalesce(last_seen, registered_at)) FILTER (WHERE health <> 'unhealthy')"
            "  + make_interval(secs => $1), "
            " min(next_probe_at) FILTER (WHERE last_heartbeat IS NULL)) - now())::float8 "
            "FROM peers",
            silence,
        )
        return due

    async def claim_probes(self, lease: float, limit: int = 32) -> list[Peer]:
        """Peers that send no heartbeats and whose probe is due, claimed for `lease` seconds:
        another worker does not probe them meanwhile."""
        rows = await self._pool.fetch(
            "UPDATE peers SET next_probe_at = now() + make_interval(secs => $1) "
            "WHERE (tenant, id) IN (SELECT tenant, id FROM peers "
            "  WHERE last_heartbeat IS NULL AND next_probe_at <= now() "
            "  ORDER BY next_probe_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
            f"RETURNING {_COLUMNS}",
            lease,
            limit,
        )
        return [_peer(r) for r in rows]

    async def probed(
        self, peer: Peer, *, alive: bool, interval: float, max_backoff: float
    ) -> Peer | None:
        """Record a probe's outcome and schedule the next: after `interval` when alive, else
        after `interval` doubled per failure in a row, at most `max_backoff`. A live peer is
        healthy at once; a dead one only once silent for the timeout (`mark_silent`). Returns
        the peer if its health changed."""
        row = await self._pool.fetchrow(
            "UPDATE peers AS p SET "
            " probe_failures = CASE WHEN $3 THEN 0 ELSE p.probe_failures + 1 END, "
            " last_seen = CASE WHEN $3 THEN now() ELSE p.last_seen END, "
            " health = CASE WHEN $3 THEN 'healthy' ELSE p.health END, "
            " health_changed_at = CASE WHEN $3 AND p.health <> 'healthy' THEN now() "
            "  ELSE p.health_changed_at END, "
            " next_probe_at = now() + make_interval(secs => CASE WHEN $3 THEN $4 "
            "  ELSE least($4 * 2 ^ least(p.probe_failures, 20), $5) END) "
            "FROM (SELECT tenant, id, health FROM peers WHERE tenant = $1 AND id = $2 "
            "      FOR UPDATE) AS old "
            "WHERE p.tenant = old.tenant AND p.id = old.id "
            f"RETURNING {', '.join('p.' + c for c in _COLUMNS.split(', '))}, "
            " old.health AS before",
            peer.tenant,
            peer.id,
            alive,
            interval,
            max_backoff,
        )
        if row is None or row["before"] == row["health"]:
            return None
        return _peer(row)


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _peer(row: asyncpg.Record) -> Peer:
    card = row["card"]
    last_heartbeat: datetime | None = row["last_heartbeat"]
    return Peer(
        id=row["id"],
        tenant=row["tenant"],
        name=row["name"],
        endpoint=row["endpoint"],
        protocol_version=row["protocol_version"],
        card=orjson.loads(card) if card is not None else None,
        card_url=row["card_url"],
        skills=tuple(
            PeerSkill(**{**s, "tags": tuple(s["tags"])}) for s in orjson.loads(row["skills"])
        ),
        security=tuple(orjson.loads(row["security"])),
        health=row["health"],
        last_heartbeat=last_heartbeat,
        registered_at=row["registered_at"],
    )
