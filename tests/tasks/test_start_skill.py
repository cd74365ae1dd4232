"""The task engine's neutral API: a skill started by name with arguments, its progress, and its
outcome read back as the skill's output model or a typed failure, with no A2A message built by
the caller (what MCP's durable calls, the CLI and the orchestrator use)."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.schema.a2a import TaskState
from agentic_rag.skills import DataResult, FileResult, SkillContext, SkillError, SkillRegistry
from agentic_rag.tasks.errors import TaskNotFoundError, TaskRequestError
from agentic_rag.tasks.outcomes import Canceled, Completed, Failed, NeedsInput, Outcome
from agentic_rag.tasks.service import TaskService


class Count(BaseModel):
    up_to: int


class Counted(BaseModel):
    numbers: list[int]


class Ask(BaseModel):
    question: str


def registry() -> SkillRegistry:
    skills = SkillRegistry()

    @skills.skill(description="Counts, telling each number as progress.")
    async def count(ctx: SkillContext, args: Count) -> Counted:
        for n in range(1, args.up_to + 1):
            await ctx.progress(f"at {n}")
        return Counted(numbers=list(range(1, args.up_to + 1)))

    @skills.skill(description="Counts, and attaches what it counted in every form.")
    async def count_and_attach(ctx: SkillContext, args: Count) -> Counted:
        await ctx.partial("1, ", artifact_id="so-far")  # a partial result is not attached
        await ctx.attach("counted", DataResult({"up_to": args.up_to}), name="note")
        await ctx.attach(
            FileResult("n.bin", "application/octet-stream", content=bytes(range(args.up_to))),
            FileResult("n.txt", "text/plain", url="https://example.com/n.txt"),
        )
        return Counted(numbers=list(range(1, args.up_to + 1)))

    @skills.skill(description="Fails with a reason.")
    async def refuse(ctx: SkillContext, args: Ask) -> Counted:
        raise SkillError(f"refused: {args.question}")

    @skills.skill(description="Asks the caller before it answers.")
    async def ask(ctx: SkillContext, args: Ask) -> Counted:
        ctx.ask(f"which {args.question}?")

    return skills


@pytest.fixture
async def tasks(database_url: str, data_dir: Path) -> AsyncIterator[TaskService]:
    engine = Engine(Settings(data_dir=data_dir, database_url=database_url), registry())
    await engine.start()
    try:
        yield engine.tasks
    finally:
        await engine.stop()


async def test_with_one_slot_started_skills_run_one_after_another(
    database_url: str, data_dir: Path
) -> None:
    """A run gives its slot back when it ends, whatever the outcome: with one slot
    (max_running_tasks 1), skills started at once all end, the refused one among them."""
    settings = Settings(data_dir=data_dir, database_url=database_url, max_running_tasks=1)
    engine = Engine(settings, registry())
    await engine.start()
    try:
        tasks = engine.tasks
        started = [
            await tasks.start_skill("acme", "count", {"up_to": n}, groups=None) for n in (1, 2)
        ]
        started.insert(
            1, await tasks.start_skill("acme", "refuse", {"question": "now"}, groups=None)
        )
        # A slot never given back would leave the next task queued: the wait would not end.
        outcomes = [
            await asyncio.wait_for(tasks.outcome("acme", s.task_id, wait=True), timeout=60)
            for s in started
        ]
    finally:
        await engine.stop()
    assert [type(o) for o in outcomes] == [Completed, Failed, Completed]
    assert [o.output for o in outcomes if isinstance(o, Completed)] == [
        Counted(numbers=[1]),
        Counted(numbers=[1, 2]),
    ]


async def test_a_started_skill_reports_progress_then_its_output_model(tasks: TaskService) -> None:
    started = await tasks.start_skill("acme", "count", {"up_to": 3}, follow=True, groups=None)
    try:
        progress = [text async for text in started.progress()]
    finally:
        started.close()
    outcome = await tasks.outcome("acme", started.task_id)
    assert progress == ["at 1", "at 2", "at 3"]
    assert isinstance(outcome, Completed)
    assert outcome.output == Counted(numbers=[1, 2, 3])  # the skill's model, not JSON
    assert outcome.skill.name == "count"
    view = await tasks.view("acme", started.task_id)
    assert view.state is TaskState.completed and view.created_at is not None


async def test_a_completed_outcome_carries_what_the_skill_attached(tasks: TaskService) -> None:
    started = await tasks.start_skill("acme", "count_and_attach", {"up_to": 3}, groups=None)
    outcome = await tasks.outcome("acme", started.task_id, wait=True)
    assert isinstance(outcome, Completed) and outcome.output == Counted(numbers=[1, 2, 3])
    assert outcome.attached == [
        "counted",
        DataResult({"up_to": 3}),
        FileResult("n.bin", "application/octet-stream", content=b"\x00\x01\x02"),
        FileResult("n.txt", "text/plain", url="https://example.com/n.txt"),
    ]


async def test_outcomes_that_are_no_result_are_typed(tasks: TaskService) -> None:
    refused = await tasks.start_skill("acme", "refuse", {"question": "why"}, groups=None)
    asked = await tasks.start_skill("acme", "ask", {"question": "colour"}, groups=None)
    failed = await tasks.outcome("acme", refused.task_id, wait=True)
    paused = await tasks.outcome("acme", asked.task_id, wait=True)
    assert failed == Failed(refused.task_id, failed.skill, "refused: why")
    assert paused == NeedsInput(asked.task_id, paused.skill, "which colour?")
    canceled: Outcome = await _canceled(tasks, asked.task_id)
    assert isinstance(canceled, Canceled) and canceled.task_id == asked.task_id


async def _canceled(tasks: TaskService, task_id: str) -> Outcome:
    await tasks.cancel("acme", task_id)
    return await tasks.outcome("acme", task_id)


async def test_a_chosen_task_id_makes_a_start_idempotent(tasks: TaskService) -> None:
    first = await tasks.start_skill("acme", "count", {"up_to": 2}, task_id="step-1", groups=None)
    done = await tasks.outcome("acme", first.task_id, wait=True)
    again = await tasks.start_skill("acme", "count", {"up_to": 2}, task_id="step-1", groups=None)
    assert first.task_id == again.task_id == "step-1"
    assert await tasks.outcome("acme", "step-1") == done  # the same task, not a second run
    assert len((await tasks.get("acme", "step-1")).artifacts or []) == 1


async def test_wrong_starts_are_refused_before_a_task_exists(tasks: TaskService) -> None:
    with pytest.raises(TaskRequestError, match="unknown skill 'nope'; this agent has: count"):
        await tasks.start_skill("acme", "nope", {}, groups=None)
    with pytest.raises(TaskRequestError, match=r"invalid arguments for skill 'count': up_to"):
        await tasks.start_skill("acme", "count", {"up_to": "many"}, groups=None)
    assert await tasks.views("acme", None, 10) == []
    with pytest.raises(TaskNotFoundError):
        await tasks.outcome("other-tenant", "step-1")
