"""Orchestration: a plan of steps run across this agent's skills and its peers.

A plan is a graph of steps. Each step names a `skill` of this agent or a `capability` of a
peer (run as a `delegate_task`), its `input` (arguments), the steps it `depends_on`, and
whether it is `optional`. Input strings may refer to outputs of the steps it depends on:

    "${fetch}"             the whole output of step `fetch` (any JSON value)
    "${fetch.text}"        a field of it (dots go deeper; list items by index)
    "found: ${fetch.text}" text with the value written in (JSON when it is not a string)

Every step runs as a local A2A task of its own (in the orchestration's context, with an id
derived from the plan's and the step's), steps whose dependencies are done run in parallel,
and each step's progress is the orchestration's progress. The result is one artifact with
every step's outcome. An optional step may fail: its dependents see `null` for it, and the
orchestration completes `degraded`. A required step that fails cancels the running steps and
fails the orchestration. Canceling the orchestration cancels its running steps.

The plan and each step's state are in PostgreSQL (`PlanStore`), and `orchestrate` is a
resumable skill: after a crash, the worker that takes the task over runs it again, which
follows the steps that were running and starts those that were not. A step whose task the crash
ended (a skill that is not resumable fails when its worker dies) is run again, once.

With an LLM configured and no plan given, the LLM decomposes the goal into a plan of this
agent's skills and its peers' capabilities.
"""

import asyncio
import contextlib
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Self

import orjson
from pydantic import BaseModel, Field, ValidationError, model_validator

from agentic_rag.llm.chat import OpenAIChat
from agentic_rag.network.delegation import BEST
from agentic_rag.network.errors import PlanFailed, PlanRefused
from agentic_rag.network.plan_store import PlanStore, StoredPlan, StoredStep
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.schema.a2a import TaskState
from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.skills.groups import refusal, selects
from agentic_rag.tasks.errors import TaskError, TaskNotCancelableError, TaskNotFoundError
from agentic_rag.tasks.outcomes import (
    Canceled,
    Completed,
    Failed,
    NeedsInput,
    Outcome,
    Running,
)
from agentic_rag.tasks.service import TaskService

log = logging.getLogger(__name__)

# The namespace of step task ids: one id per plan, step and attempt.
STEP_TASKS = uuid.UUID("1c6b2f0e-3d4a-4e8b-b7a9-5f2d8c0e6a31")
# Whole-string references keep the value's type; others are written into the text.
_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*)\}")
# Skills a step may not name: an orchestration inside a step would be a plan in a plan.
NOT_A_STEP = frozenset({"orchestrate"})
# The skill a step naming a peer's capability runs.
DELEGATE = "delegate_task"


class PlanStep(BaseModel):
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The step's name in the plan.")
    skill: str | None = Field(None, description="A skill of this agent.")
    capability: str | None = Field(None, description="A peer's capability (delegated).")
    peer: str = Field(BEST, description='With `capability`: a peer id, or "best".')
    input: dict[str, Any] = Field(
        default_factory=dict, description="The arguments; strings may hold ${step.path}."
    )
    message: str | None = Field(None, description="With `capability`: text for the peer.")
    depends_on: list[str] = Field(default_factory=list)
    optional: bool = Field(False, description="May fail without failing the orchestration.")
    timeout_seconds: float = Field(300.0, gt=0, description="With `capability`: its timeout.")

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.skill is None) == (self.capability is None):
            raise ValueError(f"step {self.id!r} must name a skill or a capability (one of them)")
        if self.skill in NOT_A_STEP:
            raise ValueError(f"step {self.id!r}: {self.skill!r} cannot be a step")
        return self

    def references(self) -> set[str]:
        text = orjson.dumps([self.input, self.message]).decode()
        return {match[1] for match in _REFERENCE.finditer(text)}


class Plan(BaseModel):
    steps: list[PlanStep] = Field(min_length=1, max_length=100)

    @model_validator(mode="after")
    def _a_graph(self) -> Self:
        ids = [s.id for s in self.steps]
        if len(ids) != len(set(ids)):
            raise ValueError("step ids must be unique")
        for step in self.steps:
            unknown = set(step.depends_on) - set(ids)
            if unknown:
                raise ValueError(f"step {step.id!r} depends on unknown steps {sorted(unknown)}")
            stray = step.references() - set(step.depends_on)
            if stray:
                raise ValueError(
                    f"step {step.id!r} refers to {sorted(stray)} without depending on them"
                )
        _check_acyclic(self.steps)
        return self


class OrchestrateInput(BaseModel):
    goal: str = Field(min_length=1, description="What the plan is for.")
    plan: list[PlanStep] | None = Field(
        None, description="The steps; without them the configured LLM plans the goal."
    )

    @model_validator(mode="after")
    def _valid_plan(self) -> Self:
        if self.plan is not None:
            Plan(steps=self.plan)  # raises with the reason
        return self


class StepOutcome(BaseModel):
    id: str
    state: Literal["completed", "failed", "canceled"]
    task_id: str | None
    output: Any = None
    error: str | None = None


class OrchestrationResult(BaseModel):
    goal: str
    state: Literal["completed", "degraded"] = Field(
        description="`degraded`: optional steps failed."
    )
    steps: list[StepOutcome]
    outputs: dict[str, Any] = Field(description="Each completed step's output, by step id.")

    def render(self) -> str:
        lines = [f"{self.goal}: {self.state}"]
        for step in self.steps:
            detail = step.error or _short(step.output)
            lines.append(f"- {step.id}: {step.state}" + (f" ({detail})" if detail else ""))
        return "\n".join(lines)


class StepFailed(Exception):
    def __init__(self, step_id: str, reason: str) -> None:
        super().__init__(f"step {step_id!r} failed: {reason}")


class Orchestrator:
    def __init__(
        self,
        store: PlanStore,
        registry: SkillRegistry,
        peers: PeerRegistry,
        tasks: TaskService,
        llm: OpenAIChat | None = None,
    ) -> None:
        self._store, self._registry, self._peers = store, registry, peers
        self._tasks, self._llm = tasks, llm

    async def run(self, ctx: SkillContext, args: OrchestrateInput) -> OrchestrationResult:
        stored = await self._store.get(ctx.tenant, ctx.task_id)
        if stored is None:
            steps = args.plan if args.plan is not None else await self._decompose(ctx, args.goal)
            self._check_skills(steps, ctx.groups)
            plan = [s.model_dump(mode="json") for s in steps]
            stored = await self._store.create(ctx.tenant, ctx.task_id, args.goal, plan)
        else:
            await ctx.progress("continuing the plan after a restart")
        run = _PlanRun(self, ctx, stored)
        try:
            return await run.run()
        except asyncio.CancelledError:
            if self._cancel_requested(ctx.tenant, ctx.task_id):
                await self._store.finish(ctx.tenant, ctx.task_id, "canceled")
            raise  # else a shutdown: the task resumes with the plan as stored

    def _check_skills(self, steps: list[PlanStep], groups: frozenset[str] | None) -> None:
        """Refuse a plan before any step runs if a step names no skill of this agent, or one
        outside the caller's groups of tools (a capability runs as `delegate_task`): a plan
        does no more than its caller may do directly. Each step's start checks it again."""
        for step in steps:
            name = step.skill or DELEGATE
            skill = self._registry.get(name)
            if skill is None and step.skill is not None:
                raise PlanRefused(
                    f"step {step.id!r}: this agent has no skill {step.skill!r} "
                    "(a peer's skill is a `capability`)"
                )
            if skill is not None and groups is not None and not selects(groups, skill):
                raise PlanRefused(f"step {step.id!r}: {refusal(groups, skill)}")

    def _cancel_requested(self, tenant: str, task_id: str) -> bool:
        return self._tasks.canceling(tenant, task_id)

    async def _decompose(self, ctx: SkillContext, goal: str) -> list[PlanStep]:
        """The LLM's plan for `goal`, over this agent's skills and its peers' capabilities."""
        if self._llm is None:
            raise PlanRefused("no plan was given, and no LLM is configured to make one")
        skills = [
            f"- {s.name}: {s.description}"
            for s in self._registry
            if s.name not in NOT_A_STEP and selects(ctx.groups, s)
        ]
        peers = await self._peers.find(ctx.tenant)
        capabilities = sorted(
            {f"- {skill.id}: {skill.description}" for p in peers for skill in p.skills}
        )
        prompt = (
            'Plan the goal as JSON: {"steps": [{"id", "skill" or "capability", '
            '"input" (arguments), "message" (text for a capability), "depends_on", '
            '"optional"}]}. A string "${id}" or "${id.field}" in input or message is the '
            "output of an earlier step the step depends on. Steps without dependencies between "
            "them run in parallel.\n\nSkills of this agent:\n"
            + ("\n".join(skills) or "(none)")
            + "\n\nCapabilities of peers:\n"
            + ("\n".join(capabilities) or "(none)")
        )
        reply = await self._llm.complete(
            [{"role": "system", "content": prompt}, {"role": "user", "content": goal}],
            max_tokens=1024,
            json_object=True,
        )
        try:
            plan = Plan.model_validate_json(reply)
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise PlanRefused(f"the LLM's plan is not usable: {problem['msg']}") from None
        await ctx.progress(
            f"planned {len(plan.steps)} steps: {', '.join(s.id for s in plan.steps)}"
        )
        return plan.steps


@dataclass
class _PlanRun:
    """One run of a plan's task: every unsettled step as a coroutine that waits for its
    dependencies, runs its task and records how it ended."""

    orchestrator: Orchestrator
    ctx: SkillContext
    stored: StoredPlan
    outcomes: dict[str, StepOutcome] = field(default_factory=dict)
    settled: dict[str, asyncio.Event] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)  # step id -> its task's id
    cascade: bool = False  # a required step failed: the others' tasks are canceled too

    async def run(self) -> OrchestrationResult:
        steps = [PlanStep.model_validate(s) for s in self.stored.plan]
        for step in steps:
            self.settled[step.id] = asyncio.Event()
            stored = self.stored.steps.get(step.id)
            if stored is not None and stored.state not in ("pending", "running"):
                self.outcomes[step.id] = _outcome(stored)
                self.settled[step.id].set()
        try:
            async with asyncio.TaskGroup() as group:
                for step in steps:
                    if step.id not in self.outcomes:
                        group.create_task(self._step(step), name=f"step {step.id}")
        except* StepFailed as failed:
            reason = "; ".join(str(e) for e in failed.exceptions)
            await self._store.finish(self.ctx.tenant, self.stored.id, "failed")
            raise PlanFailed(reason) from None
        outcomes = [self.outcomes[s.id] for s in steps]
        degraded = any(o.state != "completed" for o in outcomes)
        await self._store.finish(self.ctx.tenant, self.stored.id, "completed")
        return OrchestrationResult(
            goal=self.stored.goal,
            state="degraded" if degraded else "completed",
            steps=outcomes,
            outputs={o.id: o.output for o in outcomes if o.state == "completed"},
        )

    @property
    def _store(self) -> PlanStore:
        return self.orchestrator._store

    @property
    def _service(self) -> TaskService:
        return self.orchestrator._tasks

    async def _step(self, step: PlanStep) -> None:
        for dependency in step.depends_on:
            await self.settled[dependency].wait()
        stored = self.stored.steps.get(step.id)
        try:
            if stored is not None and stored.state == "running" and stored.task_id is not None:
                task_id = stored.task_id
                self.running[step.id] = task_id
                try:
                    outcome = await self._follow(step, task_id)
                except TaskNotFoundError:
                    # The crash came between recording the step started and creating its task:
                    # this attempt's task is created now (its id is the same).
                    task_id, outcome = await self._start(step, stored.attempt)
                else:
                    if outcome.state in (TaskState.failed, TaskState.canceled):
                        # Ended while no orchestrator followed it (the crash may have ended
                        # it): run it once more.
                        await self.ctx.progress(f"step {step.id}: running it again after a restart")
                        task_id, outcome = await self._start(step, stored.attempt + 1)
            else:
                task_id, outcome = await self._start(step, 0)
        except asyncio.CancelledError:
            running = self.running.get(step.id)
            if running is not None and (self.cascade or self._client_canceled()):
                await self._cancel(step, running)
            raise
        await self._settle(step, task_id, outcome)

    async def _start(self, step: PlanStep, attempt: int) -> tuple[str, Outcome]:
        task_id = uuid.uuid5(STEP_TASKS, f"{self.stored.id}\n{step.id}\n{attempt}").hex
        skill, arguments = self._invocation(step)
        await self._store.start_step(
            self.ctx.tenant, self.stored.id, step.id, task_id=task_id, attempt=attempt
        )
        self.running[step.id] = task_id
        try:
            # The step's own task id: started again after a crash, it is the same task.
            await self._service.start_skill(
                self.ctx.tenant,
                skill,
                arguments,
                groups=self.ctx.groups,  # the plan's caller's, so a step may do what it may
                context_id=self.ctx.context_id,
                task_id=task_id,
                references=[self.stored.id],
            )
        except TaskError as exc:  # invalid arguments, once references were resolved
            raise StepFailed(step.id, exc.message) from None
        await self.ctx.progress(f"step {step.id}: started ({skill}, task {task_id})")
        return task_id, await self._follow(step, task_id)

    def _invocation(self, step: PlanStep) -> tuple[str, dict[str, Any]]:
        arguments = _resolve(step.input, self._outputs())
        if step.skill is not None:
            return step.skill, arguments
        message = _resolve(step.message, self._outputs()) if step.message else None
        return DELEGATE, {
            "target_agent": step.peer,
            "capability_name": step.capability,
            "parameters": arguments,
            "message": message if message is None else str(message),
            "timeout_seconds": step.timeout_seconds,
        }

    def _outputs(self) -> dict[str, Any]:
        # A failed optional step's output is null to the steps after it.
        return {k: o.output if o.state == "completed" else None for k, o in self.outcomes.items()}

    async def _follow(self, step: PlanStep, task_id: str) -> Outcome:
        """The step's task once it is final (or paused), its progress shown as the plan's."""
        async for text in self._service.progress(self.ctx.tenant, task_id):
            await self.ctx.progress(f"step {step.id}: {text}")
        return await self._service.outcome(self.ctx.tenant, task_id)

    async def _settle(self, step: PlanStep, task_id: str, outcome: Outcome) -> None:
        tenant, plan_id = self.ctx.tenant, self.stored.id
        if isinstance(outcome, Completed):
            output = outcome.output.model_dump(mode="json")
            await self._store.finish_step(tenant, plan_id, step.id, "completed", output=output)
            self.outcomes[step.id] = StepOutcome(
                id=step.id, state="completed", task_id=task_id, output=output
            )
            await self.ctx.progress(f"step {step.id}: completed")
            self.settled[step.id].set()
            return
        match outcome:
            case (
                Failed(reason=said)
                | Canceled(reason=said)
                | NeedsInput(question=said)
                | Running(message=said)
            ):
                reason = said or f"its task ended {outcome.state.value}"
        if isinstance(outcome, NeedsInput):
            reason = f"its task asks for input: {reason}"
        await self._store.finish_step(tenant, plan_id, step.id, "failed", error=reason)
        self.outcomes[step.id] = StepOutcome(
            id=step.id, state="failed", task_id=task_id, error=reason
        )
        await self.ctx.progress(f"step {step.id}: failed: {reason}")
        self.settled[step.id].set()
        if not step.optional:
            self.cascade = True
            raise StepFailed(step.id, reason)

    def _client_canceled(self) -> bool:
        return self.orchestrator._cancel_requested(self.ctx.tenant, self.ctx.task_id)

    async def _cancel(self, step: PlanStep, task_id: str) -> None:
        with contextlib.suppress(TaskNotFoundError, TaskNotCancelableError):
            await self._service.cancel(self.ctx.tenant, task_id)
        await self._store.finish_step(
            self.ctx.tenant, self.stored.id, step.id, "canceled", error="canceled"
        )


def _outcome(stored: StoredStep) -> StepOutcome:
    assert stored.state not in ("pending", "running")
    return StepOutcome(
        id=stored.step_id,
        state=stored.state,
        task_id=stored.task_id,
        output=stored.output,
        error=stored.error,
    )


def _resolve(value: Any, outputs: dict[str, Any]) -> Any:
    """`value` with its references to earlier outputs replaced (see the module's docstring)."""
    if isinstance(value, dict):
        return {k: _resolve(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, outputs) for v in value]
    if not isinstance(value, str):
        return value
    whole = _REFERENCE.fullmatch(value)
    if whole is not None:
        return _lookup(outputs, whole[1], whole[2])

    def written(match: re.Match[str]) -> str:
        found = _lookup(outputs, match[1], match[2])
        return found if isinstance(found, str) else orjson.dumps(found).decode()

    return _REFERENCE.sub(written, value)


def _lookup(outputs: dict[str, Any], step_id: str, path: str) -> Any:
    value = outputs.get(step_id)
    for key in filter(None, path.split(".")):
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def _check_acyclic(steps: list[PlanStep]) -> None:
    depends = {s.id: set(s.depends_on) for s in steps}
    done: set[str] = set()
    while len(done) < len(depends):
        ready = {s for s, deps in depends.items() if s not in done and deps <= done}
        if not ready:
            cycle = sorted(set(depends) - done)
            raise ValueError(f"the steps {cycle} depend on each other in a cycle")
        done |= ready


def _short(value: Any) -> str:
    if value is None:
        return ""
    text = value.get("text") if isinstance(value, dict) else value
    text = text if isinstance(text, str) else orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."
