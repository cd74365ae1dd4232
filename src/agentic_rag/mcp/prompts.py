"""The prompt `answer_with_citations`: sources retrieved for a question, and how to cite them.

Getting the prompt runs the `hybrid_retrieve` skill for the question, as the caller's tenant,
and gives the client one user message: answer from these numbered sources only, cite them
as [n], and say so when they do not hold the answer. The model writes the answer; the server
only retrieves (no LLM is needed). Offered when the registry has `hybrid_retrieve` and the
caller may call it (its groups of tools, listing.py).
"""

import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agentic_rag.knowledge.results import SearchHit, SearchResult
from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.client_log import LogLevels
from agentic_rag.mcp.context import McpSkillContext, ProgressSteps
from agentic_rag.mcp.listing import ToolSurface
from agentic_rag.skills import SkillError, SkillRegistry
from agentic_rag.skills.metering import SkillCall

NAME = "answer_with_citations"
RETRIEVER = "hybrid_retrieve"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20

PROMPT = types.Prompt(
    name=NAME,
    title="Answer with citations",
    description="Retrieve sources for a question from the knowledge base, and ask the model "
    "to answer from them only, citing each as [n].",
    arguments=[
        types.PromptArgument(name="question", description="The question", required=True),
        types.PromptArgument(
            name="top_k",
            description=f"How many sources (1 to {MAX_TOP_K}, {DEFAULT_TOP_K} if left out)",
            required=False,
        ),
    ],
)

INSTRUCTIONS = (
    "Answer the question below using only the numbered sources that follow. Cite the source "
    "of every statement with its number in square brackets, like [1] or [2][3]. If the "
    "sources do not hold the answer, say so instead of answering from anything else."
)


def _where(hit: SearchHit) -> str:
    p = hit.provenance
    where = p.uri
    if p.page is not None:
        where += f", page {p.page}"
    if p.start_seconds is not None:
        where += f", at {p.start_seconds:.0f} s"
    return where


def prompt_text(question: str, result: SearchResult) -> str:
    sources = [
        f"[{n}] {hit.provenance.title} ({_where(hit)})\n{hit.text.strip()}"
        for n, hit in enumerate(result.hits, start=1)
    ]
    listed = "\n\n".join(sources) if sources else "(none: nothing in the knowledge base matches)"
    return f"{INSTRUCTIONS}\n\nQuestion: {question}\n\nSources:\n\n{listed}"


def _top_k(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_TOP_K
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_TOP_K:
        raise MCPError(
            types.INVALID_PARAMS,
            f"top_k of prompt {NAME!r} is a whole number from 1 to {MAX_TOP_K}, not {raw!r}",
        )
    return int(raw)


class CitationPrompt:
    """The `prompts/list` and `prompts/get` handlers."""

    def __init__(
        self,
        registry: SkillRegistry,
        principal_for: PrincipalFor,
        levels: LogLevels,
        surface: ToolSurface,
    ) -> None:
        self._retriever = registry.get(RETRIEVER)
        self._principal_for, self._levels, self._surface = principal_for, levels, surface

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        principal = require(self._principal_for(ctx), "read", "prompts/list")
        skill = self._retriever
        offered = skill is not None and self._surface.allows(principal, skill)
        return types.ListPromptsResult(prompts=[PROMPT] if offered else [])

    async def get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        principal = require(self._principal_for(ctx), "read", "prompts/get")
        skill = self._retriever
        if params.name != NAME or skill is None:
            offered = NAME if skill is not None else "none"
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {params.name!r}; this server has: {offered}"
            )
        self._surface.check(principal, skill)  # it runs the tool: the caller's to call
        arguments = params.arguments or {}
        question = (arguments.get("question") or "").strip()
        if not question:
            raise MCPError(types.INVALID_PARAMS, f"prompt {NAME!r} needs the argument 'question'")
        try:
            args = skill.input_model.model_validate(
                {"query": question, "top_k": _top_k(arguments.get("top_k")), "answer": False}
            )
        except ValidationError as exc:
            raise MCPError(types.INVALID_PARAMS, f"prompt {NAME!r}: {exc}") from None
        steps = ProgressSteps(ctx.session.report_progress, self._levels.for_request(ctx), NAME)
        context = McpSkillContext(principal.tenant, [question], steps, groups=principal.groups)
        try:
            with SkillCall(skill.name, "mcp"):
                result = await skill.handler(context, args)
        except SkillError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"prompt {NAME!r}: {exc}") from None
        if not isinstance(result, SearchResult):
            raise TypeError(f"{skill.name} returned {type(result).__name__}, not a SearchResult")
        return types.GetPromptResult(
            description=f"{len(result.hits)} sources for: {question} "
            f"(explain_answer trajectory_id: {result.trajectory_id})",
            messages=[
                types.PromptMessage(
                    role="user",
                    content=types.TextContent(type="text", text=prompt_text(question, result)),
                )
            ],
        )
