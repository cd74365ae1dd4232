"""Orchestration: a plan of steps across this agent's skills and its peers, each step a task.

Independent steps run in parallel, a step's input refers to earlier outputs, optional steps
may fail (the result is `degraded`), a failed required step fails the plan, a cancel reaches
every running step, and a plan whose worker is killed is finished by another worker. With an
LLM (a test double of a hosted chat API), a goal without a plan is planned by it.
"""

import os
import signal
from pathlib import Path
from typing import Any

from tests.support.hosted_chat import HostedChatDouble
from tests.support.live import free_port, serve_in_thread
from tests.support.peers.network import (
    Delegator,
    Peers,
    delegator,
    delegator_process,
    remote_task,
    result_data,
    status_text,
)
from tests.support.rpc import call, stream


def on_peer(step_id: str, peer: str, text: str, **fields: Any) -> dict[str, Any]:
    """A step delegated to `peer` with the script `text`."""
    return {"id": step_id, "capability": "conformance", "peer": peer, "message": text, **fields}


def test_a_plan_runs_independent_steps_in_parallel_and_gathers_their_outputs(
    network: Peers, local: Delegator
) -> None:
    a = local.register(card_url=network.ours_a)
    sdk = local.register(card_url=network.sdk)
    plan = [
        on_peer("left", a, "task 4 100"),
        on_peer("right", sdk, "task 4 100"),
        on_peer("flaky", a, "fail", optional=True),
        {
            "id": "join",
            "skill": "script",
            "input": {"text": "${left.text} and ${right.text} (${flaky})"},
            "depends_on": ["left", "right", "flaky"],
        },
    ]

    task = local.send("orchestrate", {"goal": "join two", "plan": plan}, blocking=True)

    result = result_data(task)
    assert result["state"] == "degraded"  # the optional step failed
    states = {step["id"]: step["state"] for step in result["steps"]}
    assert states == {
        "left": "completed",
        "right": "completed",
        "flaky": "failed",
        "join": "completed",
    }
    assert result["outputs"]["join"] == {
        "text": "done after 4 updates and done after 4 updates (null)"
    }
    flaky = next(step for step in result["steps"] if step["id"] == "flaky")
    assert "failed as asked" in flaky["error"]
    # Each step was a task of its own in the plan's context; left and right overlapped.
    steps = {s["id"]: local.get(s["task_id"]) for s in result["steps"]}
    assert {t["contextId"] for t in steps.values()} == {task["contextId"]}
    left, right = steps["left"], steps["right"]
    # The plan's session references the steps' delegations; their peers take part in it.
    session = local.client.get(f"/a2a/sessions/{task['contextId']}").json()
    delegated = {steps[s]["id"] for s in ("left", "right", "flaky")}
    assert {d["task_id"] for d in session["delegations"]} == delegated
    assert {p["id"] for p in session["participants"] if p["kind"] == "peer"} == {a, sdk}
    assert right["history"][0]["parts"][0]["data"]["skill"] == "delegate_task"
    started = [local.messages(t["id"])[0] for t in (left, right)]
    assert all(s.startswith("delegated to peer") for s in started)
    assert _overlap(local, left["id"], right["id"])
    progress = local.messages(task["id"])
    assert "step left: sdk-peer: step 1 of 4" not in progress  # left ran on peer a
    assert any(m.startswith("step right: sdk-peer: step") for m in progress)
    assert "step join: completed" in progress


def _overlap(local: Delegator, first: str, second: str) -> bool:
    """Whether each of two tasks started working before the other ended (their timestamps)."""
    spans = {
        t: (_first_working(local, t), local.get(t)["status"]["timestamp"]) for t in (first, second)
    }
    (start_1, end_1), (start_2, end_2) = spans[first], spans[second]
    return start_1 < end_2 and start_2 < end_1


def _first_working(local: Delegator, task_id: str) -> str:
    for event in stream(local.client, "tasks/resubscribe", {"id": task_id}, {"Last-Event-ID": "0"}):
        status = event.payload["result"].get("status")
        if status and status["state"] == "working":
            stamp: str = status["timestamp"]
            return stamp
    raise AssertionError(f"task {task_id} never worked")


def test_a_failed_required_step_fails_the_plan_and_cancels_the_running_steps(
    network: Peers, local: Delegator
) -> None:
    a = local.register(card_url=network.ours_a)
    plan = [on_peer("slow", a, "task 100 100"), on_peer("broken", a, "fail")]

    task = local.send("orchestrate", {"goal": "fail fast", "plan": plan}, blocking=True)

    assert task["status"]["state"] == "failed"
    assert status_text(task).startswith("step 'broken' failed: ")
    slow = local.wait_for_message(task["id"], r"step slow: started \(delegate_task, task (\S+)\)")
    slow_task = local.get(slow[1])
    assert slow_task["status"]["state"] == "canceled"
    remote_id = result_or_remote(local, slow_task["id"])
    assert remote_task(network.ours_a, remote_id)["status"]["state"] == "canceled"


def result_or_remote(local: Delegator, delegation_id: str) -> str:
    """The remote task id a delegation's task named when the peer accepted it."""
    return local.wait_for_message(delegation_id, r"as task (\S+)")[1]


def test_canceling_a_plan_cancels_its_running_steps(network: Peers, local: Delegator) -> None:
    sdk = local.register(card_url=network.sdk)
    plan = [
        on_peer("long", sdk, "task 100 100"),
        {"id": "local", "skill": "script", "input": {"text": "task 100 100"}},
    ]
    task = local.send("orchestrate", {"goal": "cancel me", "plan": plan}, blocking=False)
    local.wait_for_message(task["id"], r"step long: sdk-peer: step 1 of")

    canceled = local.cancel(task["id"])

    assert canceled["status"]["state"] == "canceled"
    for step in ("long", "local"):
        started = local.wait_for_message(task["id"], rf"step {step}: started \(\S+, task (\S+)\)")
        assert local.get(started[1])["status"]["state"] == "canceled"


def test_a_plan_whose_worker_is_killed_is_finished_by_another_worker(
    network: Peers, database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    doomed = delegator_process(port, database_url, tmp_path / "doomed")
    try:
        first = Delegator(f"http://127.0.0.1:{port}")
        a = first.register(card_url=network.ours_a)
        b = first.register(card_url=network.ours_b)
        plan = [
            on_peer("quick", a, "task 1 0"),
            on_peer("slow", b, "task 12 150", depends_on=["quick"]),
            {
                "id": "last",
                "skill": "script",
                "input": {"text": "after ${slow.text}"},
                "depends_on": ["slow"],
            },
        ]
        task = first.send("orchestrate", {"goal": "survive", "plan": plan}, blocking=False)
        first.wait_for_message(task["id"], r"step slow: \S+: step 2 of 12")
        first.close()
        os.kill(doomed.pid, signal.SIGKILL)  # mid-plan: quick done, slow running on peer b
        doomed.wait(timeout=10)

        with delegator(database_url, data_dir, worker_sweep_seconds=0.1) as url:
            survivor = Delegator(url)
            progress = survivor.messages(task["id"])  # read until the plan ends
            done = survivor.get(task["id"])
            slow_id = survivor.wait_for_message(
                task["id"], r"step slow: started \(\S+, task (\S+)\)"
            )[1]
            slow_messages = survivor.messages(slow_id)
            survivor.close()
    finally:
        doomed.kill()
        doomed.wait(timeout=10)
    result = result_data(done)
    assert result["state"] == "completed"
    assert result["outputs"]["last"] == {"text": "after done after 12 updates"}
    assert "continuing the plan after a restart" in progress
    assert progress.count("step quick: completed") == 1  # not run again
    # The slow step's delegation was followed on peer b, not sent to it again.
    remote = [m for m in slow_messages if m.startswith("delegated to peer")]
    assert len(remote) == 1
    assert any(m.startswith("following task") for m in slow_messages)


def test_a_plan_that_is_not_a_graph_is_refused_with_the_reason(local: Delegator) -> None:
    plan = [
        {"id": "a", "skill": "script", "depends_on": ["b"]},
        {"id": "b", "skill": "script", "depends_on": ["a"]},
    ]
    message = {
        "role": "user",
        "kind": "message",
        "messageId": "m1",
        "parts": [
            {
                "kind": "data",
                "data": {"skill": "orchestrate", "arguments": {"goal": "g", "plan": plan}},
            }
        ],
    }
    answer = call(local.client, "message/send", {"message": message})
    assert answer["error"]["code"] == -32602
    assert "depend on each other in a cycle" in answer["error"]["message"]


# What the hosted chat double answers the planner with: two steps, the second after the first.
PLAN = (
    '{"steps": [{"id": "say", "skill": "script", "input": {"text": "planned"}},'
    ' {"id": "echo", "skill": "script", "input": {"text": "${say.text}!"},'
    ' "depends_on": ["say"]}]}'
)


def test_with_an_llm_a_goal_without_a_plan_is_planned_and_run(
    database_url: str, data_dir: Path
) -> None:
    planner = HostedChatDouble(lambda body: PLAN)
    with (
        serve_in_thread(planner.app()) as llm_url,
        delegator(database_url, data_dir, llm_base_url=f"{llm_url}/v1", llm_model="m") as url,
    ):
        client = Delegator(url)
        task = client.send("orchestrate", {"goal": "say something"}, blocking=True)
        client.close()
    result = result_data(task)
    assert result["outputs"] == {"say": {"text": "planned"}, "echo": {"text": "planned!"}}
    (request,) = planner.requests
    assert request["messages"][-1] == {"role": "user", "content": "say something"}
    assert "- script:" in request["messages"][0]["content"]  # it was told the skills
