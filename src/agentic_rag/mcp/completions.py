"""MCP completion: `completion/complete` for the prompt's arguments and the template's variable.

- the document template's `document_id`: the caller's documents whose id, or title ignoring
  case, starts with what was typed (ids, titles in order);
- the prompt `answer_with_citations`: `question` from the titles of the caller's documents,
  `top_k` from the numbers it takes.

Every value is the caller's tenant's: one query of the tenant's documents with a prefix match
and a limit (knowledge/store.py `complete_documents`).
"""

from typing import TYPE_CHECKING

import mcp.types as types
from mcp.shared.exceptions import MCPError

from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.prompts import MAX_TOP_K, RETRIEVER
from agentic_rag.mcp.prompts import NAME as PROMPT
from agentic_rag.mcp.resources import TEMPLATE
from agentic_rag.skills import SkillRegistry

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

# The spec's most values in one completion.
MAX_VALUES = 100


def _completion(values: list[str], more: bool) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=values, has_more=more or None))


class Completions:
    """The `completion/complete` handler."""

    def __init__(
        self,
        registry: SkillRegistry,
        knowledge: "KnowledgeService | None",
        principal_for: PrincipalFor,
    ) -> None:
        self._knowledge, self._principal_for = knowledge, principal_for
        self._prompted = registry.get(RETRIEVER) is not None  # the prompt is offered

    async def complete(
        self, ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        principal = require(self._principal_for(ctx), "read", "completion/complete")
        ref, argument = params.ref, params.argument
        typed = argument.value
        if isinstance(ref, types.ResourceTemplateReference):
            if ref.uri != TEMPLATE or self._knowledge is None:
                raise MCPError(types.INVALID_PARAMS, f"unknown resource template {ref.uri!r}")
            if argument.name != "document_id":
                return _completion([], False)
            found = await self._documents(principal.tenant, typed)
            return _completion([i for i, _ in found[:MAX_VALUES]], len(found) > MAX_VALUES)
        if ref.name != PROMPT or not self._prompted:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {ref.name!r}")
        if argument.name == "top_k":
            numbers = [str(n) for n in range(1, MAX_TOP_K + 1) if str(n).startswith(typed)]
            return _completion(numbers, False)
        if argument.name == "question" and self._knowledge is not None:
            found = await self._documents(principal.tenant, typed)
            titles = list(dict.fromkeys(t for _, t in found if t.lower().startswith(typed.lower())))
            return _completion(titles[:MAX_VALUES], len(found) > MAX_VALUES)
        return _completion([], False)

    async def _documents(self, tenant: str, prefix: str) -> list[tuple[str, str]]:
        assert self._knowledge is not None
        # One more than is sent: whether there are more, without counting them all.
        return await self._knowledge.store.complete_documents(tenant, prefix, MAX_VALUES + 1)
