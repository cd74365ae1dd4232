"""Property: whatever clients do, every task moves only along the transition table.

Hypothesis drives the public JSON-RPC API of a real server (and of two workers of one server)
with random sequences of sends
(blocking, non-blocking, streaming), continuations, cancels, gets and resubscribes, against
skills that progress, stream, ask for input, fail or run long. Every state a client observes
is recorded per task, and then:

- consecutive states in one stream are single transitions of the table;
- consecutive observations over time follow paths of the table (reachability);
- a final state, once observed, is all that is ever observed again;
- the task's replayed event log (Last-Event-ID 0) is itself a path of the table.
"""

import itertools
import time
from collections import defaultdict
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentic_rag.schema.a2a import TaskState
from agentic_rag.tasks.states import TERMINAL, TRANSITIONS
from tests.support.live import LiveServer
from tests.support.rpc import call, stream, text_message

SCRIPTS = st.sampled_from(["task 2 10", "task 0 0", "ask", "fail", "hello", "task 6 150"])


def reachable(src: TaskState) -> set[TaskState]:
    seen, todo = {src}, [src]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


action = st.one_of(
    st.tuples(st.just("send"), SCRIPTS, st.booleans()),
    st.tuples(st.just("stream"), SCRIPTS),
    st.tuples(st.just("continue"), st.integers(0, 7), st.sampled_from(["ok", "task 1 5"])),
    st.tuples(st.just("cancel"), st.integers(0, 7)),
    st.tuples(st.just("get"), st.integers(0, 7)),
    st.tuples(st.just("resubscribe"), st.integers(0, 7)),
)


class Observer:
    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.tasks: list[tuple[str, str]] = []  # (task id, context id)
        self.seen: dict[str, list[TaskState]] = defaultdict(list)

    def observe(self, result: dict[str, Any]) -> None:
        if result.get("kind") == "task":
            self.seen[result["id"]].append(TaskState(result["status"]["state"]))

    def observe_stream(self, events: list[dict[str, Any]]) -> None:
        states: list[TaskState] = []
        for payload in events:
            assert "error" not in payload, payload
            result = payload["result"]
            if result["kind"] == "task":
                if result["id"] not in (t for t, _ in self.tasks):
                    self.tasks.append((result["id"], result["contextId"]))
                self.seen[result["id"]].append(TaskState(result["status"]["state"]))
            elif result["kind"] == "status-update":
                self.seen[result["taskId"]].append(TaskState(result["status"]["state"]))
                assert result["final"] == (payload is events[-1]), "final ends the stream"
            else:
                continue
            states.append(self.seen[result.get("taskId") or result["id"]][-1])
        for a, b in itertools.pairwise(states):
            assert b in TRANSITIONS[a] or a == b, f"stream showed {a} -> {b}"

    def pick(self, index: int) -> tuple[str, str] | None:
        return self.tasks[index % len(self.tasks)] if self.tasks else None

    def run(self, step: tuple[Any, ...], client: httpx.Client | None = None) -> None:
        """Take `step` through `client` (another worker of the same server), or the default."""
        client = client or self.client
        kind = step[0]
        if kind == "send":
            config = {"blocking": step[2]}
            reply = call(
                client,
                "message/send",
                {"message": text_message(step[1]), "configuration": config},
            )
            result = reply["result"]
            self.tasks.append((result["id"], result["contextId"]))
            self.observe(result)
        elif kind == "stream":
            self.observe_stream(
                [
                    e.payload
                    for e in stream(client, "message/stream", {"message": text_message(step[1])})
                ]
            )
        elif (picked := self.pick(step[1])) is None:
            return
        elif kind == "continue":
            task_id, context_id = picked
            message = text_message(step[2], taskId=task_id, contextId=context_id)
            reply = call(client, "message/send", {"message": message})
            # Whatever the task's state: paused, it goes on; in progress, the message joins
            # it; final, a follow-up task starts.
            assert "result" in reply, reply
            self.observe(reply["result"])
        elif kind == "cancel":
            reply = call(client, "tasks/cancel", {"id": picked[0]})
            if "result" in reply:
                assert reply["result"]["status"]["state"] == "canceled"
                self.observe(reply["result"])
            else:
                assert reply["error"]["code"] == -32002, reply
                final = TaskState(
                    call(client, "tasks/get", {"id": picked[0]})["result"]["status"]["state"]
                )
                assert final in TERMINAL
        elif kind == "get":
            self.observe(call(client, "tasks/get", {"id": picked[0]})["result"])
        elif kind == "resubscribe":
            events = [e.payload for e in stream(client, "tasks/resubscribe", {"id": picked[0]})]
            self.observe_stream(events)

    def settle(self) -> None:
        """Wait until no task is submitted or working, then check the logs and observations."""
        deadline = time.monotonic() + 30
        for task_id, _ in self.tasks:
            while True:
                result = call(self.client, "tasks/get", {"id": task_id})["result"]
                self.observe(result)
                if result["status"]["state"] not in ("submitted", "working"):
                    break
                assert time.monotonic() < deadline, f"task {task_id} never settled"
                time.sleep(0.05)
        for task_id, observed in self.seen.items():
            for a, b in itertools.pairwise(observed):
                assert b in reachable(a), f"task {task_id}: observed {a} then {b}"
                if a in TERMINAL:
                    assert b == a, f"task {task_id}: final {a} became {b}"
            replay = stream(
                self.client, "tasks/resubscribe", {"id": task_id}, {"Last-Event-ID": "0"}
            )
            states = [TaskState.submitted]
            for event in replay:
                result = event.payload["result"]
                if result["kind"] == "status-update":
                    states.append(TaskState(result["status"]["state"]))
            for a, b in itertools.pairwise(states):
                assert b in TRANSITIONS[a], f"task {task_id}: logged {a} -> {b}"


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(action, min_size=1, max_size=8))
def test_every_observed_state_sequence_is_a_path_in_the_table(
    sut: LiveServer, steps: list[tuple[Any, ...]]
) -> None:
    with httpx.Client(base_url=sut.url, timeout=30) as client:
        observer = Observer(client)
        for step in steps:
            observer.run(step)
        observer.settle()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(st.integers(0, 1), action), min_size=1, max_size=8))
def test_across_two_workers_every_observed_state_sequence_is_a_path_in_the_table(
    sut: LiveServer, sut_peer: LiveServer, steps: list[tuple[int, tuple[Any, ...]]]
) -> None:
    with (
        httpx.Client(base_url=sut.url, timeout=30) as first,
        httpx.Client(base_url=sut_peer.url, timeout=30) as second,
    ):
        observer = Observer(first)
        for worker, step in steps:
            observer.run(step, (first, second)[worker])
        observer.settle()
