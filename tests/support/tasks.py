"""Tasks made by hand, for tests that write to the store directly (as a crash leaves them)."""

from agentic_rag.schema.a2a import Message, Role, Task, TaskState, TaskStatus
from agentic_rag.tasks.parts import serialize, text_part
from agentic_rag.tasks.store import TaskWrite


def a_task(task_id: str, state: TaskState, text: str = "hi", context_id: str = "c") -> Task:
    """A task in `state` whose history is one user message with `text`."""
    message = Message(
        role=Role.user,
        kind="message",
        message_id=f"m-{task_id}",
        task_id=task_id,
        context_id=context_id,
        parts=[text_part(text)],
    )
    return Task(
        id=task_id,
        context_id=context_id,
        kind="task",
        history=[message],
        status=TaskStatus(state=state),
    )


def created(tenant: str, task: Task) -> TaskWrite:
    """The first write of `task`: its snapshot as event 1."""
    return TaskWrite(tenant, task, 1, [serialize(task, 1)])
