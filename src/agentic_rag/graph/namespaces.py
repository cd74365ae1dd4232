"""The tenant guard of the graph: which Graphiti `group_id`s a caller may name.

Every caller has one graph namespace per tenant, and may make sub-groups of it:

- `"<tenant>"` (or no `group_id` at all) names the tenant's main graph;
- `"<tenant>:<name>"` names a sub-group (`name`: letters, digits, `-` and `_`, at most 64);
- anything else is refused (`NamespaceError`), so no argument reaches another tenant's data.

FalkorDB keeps one graph per `group_id`, and Graphiti accepts only `[A-Za-z0-9_-]` in one,
while a tenant may be any string its credential carries. So the group id stored in the graph
(`Namespace.graph`) is a digest of the namespace, never a name a caller could write; callers
see their own names (`Namespace.name`) in every result.
"""

import hashlib
import re
from dataclasses import dataclass

from agentic_rag.graph.errors import InvalidRequest

SEPARATOR = ":"
SUB_GROUP = re.compile(r"[A-Za-z0-9_-]{1,64}")


class NamespaceError(InvalidRequest):
    """A `group_id` outside the caller's tenant, or not a valid sub-group name."""


@dataclass(frozen=True)
class Namespace:
    tenant: str
    sub_group: str | None = None

    @property
    def name(self) -> str:
        """What the caller writes as `group_id`, and reads in results."""
        if self.sub_group is None:
            return self.tenant
        return f"{self.tenant}{SEPARATOR}{self.sub_group}"

    @property
    def graph(self) -> str:
        """The Graphiti group id, and FalkorDB graph, that holds this namespace's data."""
        digest = hashlib.sha256(f"{self.tenant}\0{self.sub_group or ''}".encode()).hexdigest()
        return f"ns_{digest[:40]}"


def namespace(tenant: str, group_id: str | None) -> Namespace:
    """The namespace `group_id` names for a caller of `tenant`; the main one when None."""
    if group_id is None or group_id == tenant:
        return Namespace(tenant)
    prefix = f"{tenant}{SEPARATOR}"
    if group_id.startswith(prefix):
        sub_group = group_id.removeprefix(prefix)
        if SUB_GROUP.fullmatch(sub_group):
            return Namespace(tenant, sub_group)
        raise NamespaceError(
            f"group_id {group_id!r}: a sub-group name is 1 to 64 letters, digits, '-' or '_'"
        )
    raise NamespaceError(
        f"group_id {group_id!r} is outside your tenant: use {tenant!r}, "
        f"'{tenant}{SEPARATOR}<name>' for a sub-group, or leave group_id out"
    )


def namespaces(tenant: str, group_ids: str | list[str] | None) -> list[Namespace]:
    """The namespaces of a `group_ids` argument (one string or a list), each checked as
    `namespace` checks it; the tenant's main namespace when None or empty."""
    if group_ids is None or group_ids == []:
        return [Namespace(tenant)]
    names = [group_ids] if isinstance(group_ids, str) else group_ids
    return list(dict.fromkeys(namespace(tenant, name) for name in names))
