"""The task state machine: input-required, failed, canceled (docs/a2a-notes.md §4, §12)."""

import time

from conformance.support import FINAL_STATES, Rpc, roles, state, texts


def test_ask_pauses_the_task_in_input_required(rpc: Rpc) -> None:
    """§4: `input-required` is paused, not final; a blocking send returns there (§12.5)."""
    task = rpc.send_task("ask")
    assert state(task) == "input-required"
    assert state(rpc.get_task(task["id"])) == "input-required"


def test_input_required_status_carries_the_agents_question(rpc: Rpc) -> None:
    """§4: the paused status has an agent message saying what input is needed."""
    task = rpc.send_task("ask")
    question = task["status"]["message"]
    assert question["role"] == "agent"
    assert "".join(texts(question["parts"])).strip()


def test_a_message_with_the_same_task_and_context_continues_the_task(rpc: Rpc) -> None:
    """§4 (multi-turn, spec §9.4): the next message with the same `taskId` and `contextId`
    resumes the same task, which completes."""
    asked = rpc.send_task("ask")
    answered = rpc.send_task("my answer", task_id=asked["id"], context_id=asked["contextId"])
    assert answered["id"] == asked["id"]
    assert answered["contextId"] == asked["contextId"]
    assert state(answered) == "completed"


def test_a_continued_task_has_the_history_user_agent_user(rpc: Rpc) -> None:
    """§4: history accumulates: user, agent prompt, user."""
    asked = rpc.send_task("ask")
    rpc.send_task("my answer", task_id=asked["id"], context_id=asked["contextId"])
    history = rpc.get_task(asked["id"])["history"]
    assert roles(history)[:3] == ["user", "agent", "user"]
    assert texts(history[0]["parts"]) == ["ask"]
    assert texts(history[2]["parts"]) == ["my answer"]


def test_fail_ends_failed_with_a_status_message(rpc: Rpc) -> None:
    """§4: a skill failure is the terminal state `failed`, with the reason in the status."""
    task = rpc.send_task("fail")
    assert state(task) == "failed"
    reason = task["status"]["message"]
    assert reason["role"] == "agent"
    assert "".join(texts(reason["parts"])).strip()


def test_a_failed_task_is_not_cancelable(rpc: Rpc) -> None:
    """§4, §12.8: `failed` is terminal → cancel is -32002."""
    task = rpc.send_task("fail")
    rpc.error("tasks/cancel", {"id": task["id"]}, code=-32002)


def test_cancel_of_a_running_task_returns_it_canceled(rpc: Rpc) -> None:
    """§2: tasks/cancel answers the Task, here in state `canceled`."""
    task = rpc.send_task("task 50 100", blocking=False)
    assert state(task) not in FINAL_STATES
    canceled = rpc.cancel(task["id"])
    assert canceled["id"] == task["id"]
    assert state(canceled) == "canceled"


def test_cancel_right_after_a_non_blocking_send_always_cancels(rpc: Rpc) -> None:
    """§2, §4: `submitted` is not final, so a cancel arriving before the task has started
    cancels it, promptly. Repeated, because it is a race with the start of the task."""
    for attempt in range(100):
        task = rpc.send_task("task 50 100", blocking=False)
        started = time.monotonic()
        canceled = rpc.cancel(task["id"])
        took = time.monotonic() - started
        assert state(canceled) == "canceled", f"attempt {attempt}: {state(canceled)}"
        assert took < 5.0, f"attempt {attempt}: cancel took {took:.1f}s"


def test_a_canceled_task_stays_canceled(rpc: Rpc) -> None:
    """§4: `canceled` is terminal: the skill makes no further progress (state, artifacts)."""
    task = rpc.send_task("task 50 100", blocking=False)
    canceled = rpc.cancel(task["id"])
    time.sleep(1.0)  # ten more steps of the skill, had it kept running
    later = rpc.get_task(task["id"])
    assert state(later) == "canceled"
    assert later.get("artifacts", []) == canceled.get("artifacts", [])


def test_canceling_a_canceled_task_again_is_not_cancelable(rpc: Rpc) -> None:
    """§12.8: cancel of a task already canceled → -32002."""
    task = rpc.send_task("task 50 100", blocking=False)
    rpc.cancel(task["id"])
    rpc.error("tasks/cancel", {"id": task["id"]}, code=-32002)


def test_cancel_of_an_input_required_task_cancels_it(rpc: Rpc) -> None:
    """§4: a paused task is not final, so it can be canceled."""
    task = rpc.send_task("ask")
    assert state(rpc.cancel(task["id"])) == "canceled"
    assert state(rpc.get_task(task["id"])) == "canceled"
