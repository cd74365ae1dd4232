"""An API key's groups of tools: stored with the key, carried by its principal, checked when
the key is made (docs/skills.md, "Groups of tools")."""

import asyncpg
import pytest

from agentic_rag.security.api_keys import ApiKeyStore


async def test_a_keys_groups_reach_its_principal_and_its_record(pool: asyncpg.Pool) -> None:
    store = ApiKeyStore(pool)
    grouped, record = await store.create(
        "acme", ["read"], groups=["network", "knowledge", "knowledge"]
    )
    plain, _ = await store.create("acme", ["read"])
    assert record.groups == ("knowledge", "network")
    principal = await store.verify(grouped)
    assert principal is not None and principal.groups == frozenset({"knowledge", "network"})
    everything = await store.verify(plain)
    assert everything is not None and everything.groups is None
    listed = {key.id: key.groups for key in await store.list("acme")}
    assert listed[record.id] == ("knowledge", "network")
    assert sorted(listed.values(), key=str) == [("knowledge", "network"), None]


@pytest.mark.parametrize(
    ("groups", "reason"),
    [
        (["knowledge", "search"], "unknown tool groups ['search']; use ['admin', 'graph', "),
        ([], "name at least one tool group, or none at all for every group"),
    ],
)
async def test_a_key_with_unknown_or_no_groups_is_refused(
    pool: asyncpg.Pool, groups: list[str], reason: str
) -> None:
    store = ApiKeyStore(pool)
    with pytest.raises(ValueError) as refused:
        await store.create("acme", ["read"], groups=groups)
    assert str(refused.value).startswith(reason)
    assert await store.list("acme") == []
