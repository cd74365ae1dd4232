"""The skills of delegation and orchestration: `delegate_task` and `orchestrate`.

Both are resumable: each runs as a durable A2A task (its id is the delegation's or the plan's
id), which a restart, or another worker when this one dies, runs again to continue. What the
services refuse (`NetworkError`) ends the task failed with the refusal's message, word for word
(`refusing_skill`), before the task engine sees it.
"""

import functools

from agentic_rag.network.delegation import DelegationRequest, DelegationResult, DelegationService
from agentic_rag.network.errors import NetworkError
from agentic_rag.network.orchestration import (
    OrchestrateInput,
    OrchestrationResult,
    Orchestrator,
)
from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.skills.refusals import refusing_skill


def add_delegation_skills(
    registry: SkillRegistry,
    delegation: DelegationService,
    orchestrator: Orchestrator,
) -> None:
    """Add the skills to `registry`, which call `delegation` and `orchestrator`."""
    skill = functools.partial(refusing_skill, registry, NetworkError)

    @skill(
        description=(
            "Hand a task to a peer agent over A2A and follow it to its end: the peer's "
            'progress and artifacts become this task\'s. target_agent: a peer id or "best" '
            "(a healthy peer offering capability_name); parameters: the peer skill's arguments."
        ),
        summary="Hand a task to a peer agent over A2A and follow it to its end.",
        group="network",
        tags=["network", "delegation"],
        examples=['{"capability_name": "summarize", "parameters": {"text": "..."}}'],
        render=DelegationResult.render,
        resumable=True,
    )
    async def delegate_task(ctx: SkillContext, args: DelegationRequest) -> DelegationResult:
        return await delegation.run(ctx, args)

    @skill(
        description=(
            "Run a plan of steps (this agent's skills, or peers' capabilities) as tasks, "
            "independent steps in parallel, a step's input referring to earlier outputs as "
            '"${step.field}"; the result gathers every step\'s outcome. Without a plan, the '
            "configured LLM plans the goal."
        ),
        summary="Run a plan of steps (skills or peers' capabilities) as tasks, in parallel.",
        group="network",
        tags=["network", "orchestration"],
        examples=[
            '{"goal": "...", "plan": [{"id": "a", "skill": "help"}, '
            '{"id": "b", "capability": "summarize", "input": {"text": "${a.text}"}, '
            '"depends_on": ["a"]}]}'
        ],
        render=OrchestrationResult.render,
        resumable=True,
    )
    async def orchestrate(ctx: SkillContext, args: OrchestrateInput) -> OrchestrationResult:
        return await orchestrator.run(ctx, args)
