"""A credential's groups of tools over A2A (docs/skills.md, "Groups of tools"): a message
that would run a skill outside the groups its API key selects is refused before any task
exists, as MCP refuses the tool call. The Agent Card still lists every skill.

Only credentials that select groups pay for the check (one read of the task a message names).
"""

from agentic_rag.a2a.errors import ForbiddenError
from agentic_rag.a2a.invocation import resolve
from agentic_rag.schema.a2a import Message
from agentic_rag.security.principal import Principal
from agentic_rag.skills import Skill, SkillRegistry
from agentic_rag.skills.groups import refusal, selects
from agentic_rag.tasks import states
from agentic_rag.tasks.errors import TaskNotFoundError, TaskRequestError
from agentic_rag.tasks.service import TaskService


async def check_groups(
    principal: Principal, message: Message, tasks: TaskService, registry: SkillRegistry
) -> None:
    """Nothing, if `principal` may run the skill `message` calls; else `ForbiddenError`."""
    selected = principal.groups
    if selected is None:
        return
    skill = await _skill_called(principal.tenant, message, tasks, registry)
    if skill is not None and not selects(selected, skill):
        raise ForbiddenError(refusal(selected, skill))


async def _skill_called(
    tenant: str, message: Message, tasks: TaskService, registry: SkillRegistry
) -> Skill | None:
    """The skill the engine will run for `message`: that of the open task it continues, or
    the one it starts (a new task, a follow-up of a final one); None where the engine will
    refuse the message in its own words."""
    history = [message]
    if message.task_id is not None:
        try:
            task = await tasks.get(tenant, message.task_id)
        except TaskNotFoundError:
            task = None
        if task is not None and task.status.state not in states.TERMINAL:
            history = [*(task.history or []), message]
    try:
        return resolve(registry, history).skill
    except TaskRequestError:
        return None
