"""message/send: results, blocking, history, ids, final tasks, tasks in progress, sizes,
output modes (docs/a2a-notes.md §2, §5, §12.3 to §12.7, §12.11).

The SUT's skills are driven by text: `task N D`, `ask`, `listen`, `fail`; anything else is
echoed back in a completed task with one text artifact.
"""

from typing import Any

import pytest

from conformance.support import (
    FINAL_STATES,
    Rpc,
    artifact_texts,
    check_envelope,
    new_id,
    roles,
    send_params,
    state,
    text_message,
    texts,
)


@pytest.fixture
def finished_conversation(rpc: Rpc) -> dict[str, Any]:
    """A completed task with at least three messages in its history (user, agent, user)."""
    first = rpc.send_task("ask")
    task = rpc.send_task("my answer", task_id=first["id"], context_id=first["contextId"])
    assert state(task) == "completed"
    full = rpc.get_task(task["id"])
    assert len(full["history"]) >= 3
    return full


# --- results and blocking -------------------------------------------------------------------


def test_blocking_send_returns_the_completed_task(rpc: Rpc) -> None:
    """§5, §12.5: blocking (the default) answers once the task is final."""
    task = rpc.send_task("task 3 100")
    assert state(task) == "completed"
    assert task["id"] and task["contextId"]


def test_completed_echo_task_carries_the_text_as_an_artifact(rpc: Rpc) -> None:
    """§2: the result is in `Task.artifacts` (the SUT echoes the text)."""
    task = rpc.send_task("hello conformance")
    assert len(task["artifacts"]) == 1
    assert "hello conformance" in "".join(artifact_texts(task))


def test_task_history_holds_the_user_message(rpc: Rpc) -> None:
    """§2, §5: `Task.history` records the messages; the user's has its `messageId`."""
    message_id = new_id("msg-")
    task = rpc.send_task("hello history", message_id=message_id)
    user_messages = [m for m in task["history"] if m["role"] == "user"]
    assert [m["messageId"] for m in user_messages] == [message_id]
    assert texts(user_messages[0]["parts"]) == ["hello history"]


def test_explicit_blocking_true_waits_for_the_final_state(rpc: Rpc) -> None:
    """§12.5: `blocking: true` waits until the task is final."""
    task = rpc.send_task("task 2 50", blocking=True)
    assert state(task) == "completed"


def test_non_blocking_send_returns_at_once_and_the_task_completes_later(rpc: Rpc) -> None:
    """§5, §12.5: `blocking: false` returns `submitted`/`working` and keeps executing."""
    task = rpc.send_task("task 5 200", blocking=False)
    assert state(task) in ("submitted", "working")
    done = rpc.wait_for_state(task["id"], {"completed", "failed", "canceled"})
    assert state(done) == "completed"
    assert len(done["artifacts"]) == 1


# --- historyLength (§12.6) ------------------------------------------------------------------


def test_send_history_length_n_returns_the_last_n_messages(rpc: Rpc) -> None:
    """§12.6: positive N → the last N messages of the history."""
    task = rpc.send_task("ask", history_length=1)
    full = rpc.get_task(task["id"])
    assert len(full["history"]) >= 2
    assert task["history"] == full["history"][-1:]


def test_send_history_length_zero_returns_no_messages(rpc: Rpc) -> None:
    """§12.6: 0 → no messages."""
    task = rpc.send_task("ask", history_length=0)
    assert task.get("history", []) == []


def test_send_without_history_length_returns_the_whole_history(rpc: Rpc) -> None:
    """§12.6: absent → the whole history."""
    task = rpc.send_task("ask")
    full = rpc.get_task(task["id"])
    assert task["history"] == full["history"]
    assert roles(task["history"])[:2] == ["user", "agent"]


def test_get_history_length_n_returns_the_last_n_messages(
    rpc: Rpc, finished_conversation: dict[str, Any]
) -> None:
    """§12.6: tasks/get with N → the last N messages."""
    task = rpc.get_task(finished_conversation["id"], history_length=2)
    assert task["history"] == finished_conversation["history"][-2:]


def test_get_history_length_zero_returns_no_messages(
    rpc: Rpc, finished_conversation: dict[str, Any]
) -> None:
    """§12.6: tasks/get with 0 → no messages."""
    task = rpc.get_task(finished_conversation["id"], history_length=0)
    assert task.get("history", []) == []


def test_get_history_length_beyond_the_history_returns_all_of_it(
    rpc: Rpc, finished_conversation: dict[str, Any]
) -> None:
    """§12.6: "up to N" — a larger N returns the whole history."""
    task = rpc.get_task(finished_conversation["id"], history_length=1000)
    assert task["history"] == finished_conversation["history"]


def test_get_without_history_length_returns_the_whole_history(
    rpc: Rpc, finished_conversation: dict[str, Any]
) -> None:
    """§12.6: absent → the whole history: user, agent, user, in order."""
    assert roles(finished_conversation["history"])[:3] == ["user", "agent", "user"]


# --- ids (§12.3) ----------------------------------------------------------------------------


def test_a_client_chosen_task_id_creates_the_task_with_that_id(rpc: Rpc) -> None:
    """§12.3: a `taskId` naming no existing task creates the task with that id."""
    task_id = new_id("client-task-")
    task = rpc.send_task("hello", task_id=task_id)
    assert task["id"] == task_id
    assert state(rpc.get_task(task_id)) == "completed"


def test_a_retry_of_a_finished_message_returns_the_same_task_unprocessed(rpc: Rpc) -> None:
    """§12.3: the same `messageId` again is a retry: not processed again, the current task
    is returned."""
    task_id, message_id = new_id("retry-"), new_id("msg-")
    first = rpc.send_task("retry me", task_id=task_id, message_id=message_id)
    again = rpc.send_task("retry me", task_id=task_id, message_id=message_id)
    assert again["id"] == first["id"]
    assert len(again["artifacts"]) == len(first["artifacts"]) == 1
    assert len(rpc.get_task(task_id)["history"]) == len(first["history"])


def test_a_retry_while_running_does_not_start_a_second_run(rpc: Rpc) -> None:
    """§12.3: a retry of the message that started a running task returns that task; the
    skill runs once (one artifact, the user message once in the history)."""
    task_id, message_id = new_id("retry-"), new_id("msg-")
    first = rpc.send_task("task 5 100", task_id=task_id, message_id=message_id, blocking=False)
    again = rpc.send_task("task 5 100", task_id=task_id, message_id=message_id, blocking=False)
    assert again["id"] == first["id"] == task_id
    done = rpc.wait_for_state(task_id, {"completed", "failed", "canceled"})
    assert state(done) == "completed"
    assert len(done["artifacts"]) == 1
    assert [m["messageId"] for m in done["history"] if m["role"] == "user"] == [message_id]


def test_the_same_context_id_can_span_several_tasks(rpc: Rpc) -> None:
    """§5: a client reuses the `contextId`; a new message without `taskId` is a new task in
    the same context."""
    first = rpc.send_task("first")
    second = rpc.send_task("second", context_id=first["contextId"])
    assert second["id"] != first["id"]
    assert second["contextId"] == first["contextId"]


def test_a_new_task_gets_a_context_id_when_the_client_sends_none(rpc: Rpc) -> None:
    """§5: without a `contextId` a message starts a new conversation: the server generates
    a fresh context (and task) id."""
    first = rpc.send_task("one")
    second = rpc.send_task("two")
    assert first["contextId"] and second["contextId"]
    assert first["contextId"] != second["contextId"]
    assert first["id"] != second["id"]


# --- messages to a final task (§12.4) -------------------------------------------------------


def _user_messages(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in task.get("history") or [] if message["role"] == "user"]


def test_a_message_to_a_final_task_starts_a_follow_up_task_in_its_context(rpc: Rpc) -> None:
    """§4, §12.4: a final task cannot be restarted; the message starts a new task in the same
    context whose message references the final one (`referenceTaskIds`), and the answer is an
    agent Message naming both tasks (the 0.2.x/0.3 test kits accept the same task or a Message);
    the follow-up runs to its end."""
    task = rpc.send_task("hello")
    notice = rpc.send_follow_up("once more", task_id=task["id"], context_id=task["contextId"])
    assert notice["contextId"] == task["contextId"]
    follow_up = rpc.wait_for_state(notice["taskId"], FINAL_STATES)
    assert follow_up["contextId"] == task["contextId"]
    assert state(follow_up) == "completed"
    assert "once more" in "".join(artifact_texts(follow_up))
    (message,) = _user_messages(follow_up)
    assert message["taskId"] == follow_up["id"]
    assert message["referenceTaskIds"] == [task["id"]]
    assert texts(message["parts"]) == ["once more"]


def test_a_message_to_a_final_task_without_a_context_id_follows_it_up_in_its_context(
    rpc: Rpc,
) -> None:
    """§12.4: the `taskId` alone names the final task; the follow-up joins its context."""
    task = rpc.send_task("fail")
    assert state(task) == "failed"
    notice = rpc.send_follow_up("try again", task_id=task["id"])
    follow_up = rpc.wait_for_state(notice["taskId"], FINAL_STATES)
    assert follow_up["contextId"] == task["contextId"]
    assert state(follow_up) == "completed"


def test_a_message_to_a_final_task_leaves_the_task_unchanged(rpc: Rpc) -> None:
    """§4, §12.4: a terminal task cannot be restarted; nothing about it changes, neither its
    status nor its history."""
    task = rpc.send_task("hello")
    before = rpc.get_task(task["id"])
    notice = rpc.send_follow_up("once more", task_id=task["id"], context_id=task["contextId"])
    rpc.wait_for_state(notice["taskId"], FINAL_STATES)
    after = rpc.get_task(task["id"])
    assert after == before
    assert after["status"] == task["status"] and after["history"] == task["history"]


def test_the_follow_up_keeps_the_references_the_client_gave(rpc: Rpc) -> None:
    """§5, §12.4: `referenceTaskIds` the client sent are kept; the final task is added."""
    earlier = rpc.send_task("earlier")
    task = rpc.send_task("hello", context_id=earlier["contextId"])
    message = text_message(
        "follow up",
        task_id=task["id"],
        context_id=task["contextId"],
        referenceTaskIds=[earlier["id"]],
    )
    params = {"message": message, "configuration": {"acceptedOutputModes": ["text/plain"]}}
    notice = rpc.result("message/send", params)
    assert notice["kind"] == "message" and notice["referenceTaskIds"] == [task["id"]]
    (sent,) = _user_messages(rpc.get_task(notice["taskId"]))
    assert sent["referenceTaskIds"] == [earlier["id"], task["id"]]


def test_a_retried_message_to_a_final_task_runs_its_follow_up_once(rpc: Rpc) -> None:
    """§12.3, §12.4: the same `messageId` again names the same follow-up task; its skill
    does not run again."""
    task = rpc.send_task("hello")
    message_id = new_id("msg-")
    first = rpc.send_follow_up("once more", task_id=task["id"], message_id=message_id)
    again = rpc.send_follow_up("once more", task_id=task["id"], message_id=message_id)
    assert again["taskId"] == first["taskId"]
    follow_up = rpc.wait_for_state(first["taskId"], FINAL_STATES)
    assert [m["messageId"] for m in _user_messages(follow_up)] == [message_id]
    assert len(follow_up["artifacts"]) == 1


def test_a_non_blocking_message_to_a_final_task_answers_at_once(rpc: Rpc) -> None:
    """§12.4, §12.5: `blocking: false` answers the same Message; the follow-up runs on."""
    task = rpc.send_task("hello")
    notice = rpc.send_follow_up("task 3 100", task_id=task["id"], blocking=False)
    assert state(rpc.wait_for_state(notice["taskId"], FINAL_STATES)) == "completed"


def test_a_follow_up_task_may_reference_a_final_one(rpc: Rpc) -> None:
    """§5, §12.4: the follow-up is a new task in the same context with `referenceTaskIds`."""
    task = rpc.send_task("hello")
    message = text_message("follow up", context_id=task["contextId"], referenceTaskIds=[task["id"]])
    params = {"message": message, "configuration": {"acceptedOutputModes": ["text/plain"]}}
    follow_up = rpc.result("message/send", params)
    assert follow_up["kind"] == "task"
    assert follow_up["id"] != task["id"]
    assert follow_up["contextId"] == task["contextId"]
    assert state(follow_up) == "completed"


# --- messages to a task in progress ---------------------------------------------------------


def _listening(rpc: Rpc) -> dict[str, Any]:
    """A `listen` task once it works: it completes when another message reaches it."""
    task = rpc.send_task("listen", blocking=False)
    return rpc.wait_for_state(task["id"], {"working"})


def test_a_message_to_a_working_task_joins_its_history_and_the_skill_reads_it(rpc: Rpc) -> None:
    """A message to a task that works is accepted: it joins the task's history, the answer is
    the task as it stands (it still works, or has just used the message), and the running
    skill reads it."""
    task = _listening(rpc)
    message_id = new_id("msg-")
    answer = rpc.send_task("are you there?", task_id=task["id"], message_id=message_id)
    assert answer["id"] == task["id"]
    assert state(answer) in ("working", "completed")
    assert [m["messageId"] for m in _user_messages(answer)][1:] == [message_id]
    done = rpc.wait_for_state(task["id"], FINAL_STATES)
    assert state(done) == "completed"
    assert artifact_texts(done) == ["heard: are you there?"]
    assert [texts(m["parts"]) for m in _user_messages(done)] == [["listen"], ["are you there?"]]


def test_a_retry_of_a_message_to_a_working_task_joins_it_once(rpc: Rpc) -> None:
    """§12.3: the same `messageId` again is a retry: it is in the history once."""
    task = _listening(rpc)
    message_id = new_id("msg-")
    rpc.send_task("first", task_id=task["id"], message_id=message_id)
    rpc.send_task("first", task_id=task["id"], message_id=message_id)
    done = rpc.wait_for_state(task["id"], FINAL_STATES)
    assert [m["messageId"] for m in _user_messages(done)][1:] == [message_id]


# --- size ------------------------------------------------------------------------------------


def test_a_one_mebibyte_text_message_is_accepted(rpc: Rpc) -> None:
    """A request body limit well above a few MiB lets files travel as parts: a 1 MiB text
    is echoed back whole."""
    text = "0123456789abcdef" * (1024 * 1024 // 16)
    task = rpc.send_task(text)
    assert state(task) == "completed"
    assert artifact_texts(task) == [text]


# --- acceptedOutputModes (§12.7) ------------------------------------------------------------


@pytest.mark.parametrize(
    "modes",
    [None, [], ["text/plain"], ["text"], ["*/*"], ["image/png", "text/plain"]],
    ids=["missing", "empty", "text/plain", "text", "any", "png-or-text"],
)
def test_accepted_output_modes_that_allow_text_are_accepted(rpc: Rpc, modes: Any) -> None:
    """§5, §10, §12.7: optional (a2a-sdk 1.x omits it, 0.3.x sends `[]`); matching is
    lenient (`text` matches `text/plain`, `*/*` everything)."""
    task = rpc.send_task("modes", accepted_output_modes=modes)
    assert state(task) == "completed"


def test_accepted_output_modes_excluding_text_are_content_type_not_supported(rpc: Rpc) -> None:
    """§3, §12.7: a non-empty list nothing the skill produces matches → -32005."""
    rpc.error(
        "message/send", send_params("hello", accepted_output_modes=["image/png"]), code=-32005
    )


# --- unknown fields (§12.11) ----------------------------------------------------------------


def test_unknown_fields_are_ignored_everywhere(rpc: Rpc) -> None:
    """§2, §12.11: no schema object forbids extra properties; they are ignored."""
    message = text_message("extra fields", futureField={"x": 1})
    message["parts"][0]["futurePartField"] = True
    payload = {
        **rpc.envelope(
            "message/send",
            {
                "message": message,
                "configuration": {"acceptedOutputModes": ["text/plain"], "futureConfig": 1},
                "futureParam": "ignored",
            },
        ),
        "futureEnvelopeField": [1, 2],
    }
    envelope = check_envelope(
        rpc.post_json(payload), definition="SendMessageResponse", expected_id=payload["id"]
    )
    result = envelope["result"]
    assert result["kind"] == "task"
    assert state(result) == "completed"
    assert "extra fields" in "".join(artifact_texts(result))
