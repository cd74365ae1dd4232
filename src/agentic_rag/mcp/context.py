"""The skill context of one MCP `tools/call`: the caller's tenant and a progress channel."""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn

from agentic_rag.llm.chat import Chat
from agentic_rag.mcp.client_log import ClientLog, Level
from agentic_rag.mcp.sampling import ClientRoots
from agentic_rag.skills import ClientRoot, InputRequired, ResultPart, Skill

# (progress, total, message): what `ServerSession.report_progress` takes.
ReportProgress = Callable[[float, float | None, str | None], Awaitable[None]]


class ProgressSteps:
    """Counts progress notifications of one request: MCP wants `progress` to grow each time.

    One counter serves every run of the skill within the request (a run after an elicitation
    starts over, its progress must not). Each step is a log line of `logger` too, at `level`
    (client_log.py), for clients that show a server's log rather than progress.
    """

    def __init__(self, report: ReportProgress, log: ClientLog, logger: str) -> None:
        self._report, self._log, self._logger = report, log, logger
        self._steps = 0

    async def step(self, message: str, level: Level = "info") -> None:
        self._steps += 1
        await self._report(self._steps, None, message)
        await self._log.send(level, message, self._logger)


class McpSkillContext:
    """A skill's view of the tool call it runs for (see `agentic_rag.skills.SkillContext`).

    MCP has no partial results (a tool call has one final result), so `partial` chunks travel as
    progress messages, like `progress` texts.
    """

    def __init__(
        self,
        tenant: str,
        texts: Sequence[str],
        steps: ProgressSteps,
        client_model: Chat | None = None,
        client_roots: ClientRoots | None = None,
        offers: Callable[[Skill], bool] | None = None,
        *,
        groups: frozenset[str] | None,
    ) -> None:
        self._tenant, self._groups = tenant, groups
        self._texts = list(texts)
        self._steps = steps
        self._client_model = client_model  # sampling.py: the client's model, if it offers one
        self._client_roots = client_roots  # and its roots, if it offers them
        self._offers = offers  # the caller's tools (listing.py); None: every skill
        self.attached: list[ResultPart] = []
        # A tool call has no A2A task; each call is its own task and context.
        self._task_id = self._context_id = str(uuid.uuid4())

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def context_id(self) -> str:
        return self._context_id

    @property
    def texts(self) -> list[str]:
        return list(self._texts)

    @property
    def message_ids(self) -> list[str]:
        return []  # a tool call's arguments are no messages

    @property
    def client_model(self) -> Chat | None:
        return self._client_model

    @property
    def groups(self) -> frozenset[str] | None:
        return self._groups

    async def progress(self, text: str) -> None:
        await self._steps.step(text)

    async def partial(self, text: str, *, artifact_id: str, last_chunk: bool = False) -> None:
        await self._steps.step(text)

    async def attach(self, *parts: ResultPart, name: str | None = None) -> None:
        # Content blocks of the tool's result, after the output's (content.py attached_block).
        self.attached.extend(parts)

    async def client_roots(self) -> list[ClientRoot] | None:
        return None if self._client_roots is None else await self._client_roots.roots()

    def offers(self, skill: Skill) -> bool:
        return self._offers is None or self._offers(skill)

    def ask(
        self, question: str, missing: Sequence[str] = (), *, name: str | None = None
    ) -> NoReturn:
        raise InputRequired(question, missing, name)
