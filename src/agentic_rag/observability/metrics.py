"""Prometheus metrics: one registry per app, and the hooks the rest of the code calls.

Every app (`build_app`) owns a `Metrics` with its own `CollectorRegistry`, so several apps in
one process (tests) never share counts. Code that has no handle on the app (the task service,
the runner, the MCP adapter, the rate limiter) calls the module functions below; they record
into the metrics *bound* to the current context: the observability middleware binds them for
each request, and the app's lifespan binds them before the engine starts its background tasks
(which inherit the binding). Outside any app the functions do nothing.

Label values are bounded: routes are templates, JSON-RPC methods are the known ones (unknown
ones are counted as `<unknown>`), skills come from the registry.
"""

import os
from contextvars import ContextVar, Token
from typing import Any, Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from agentic_rag.observability.tally import (
    Count,
    Distribution,
    Family,
    local_counter,
    local_histogram,
)

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
# Set (by `agentic-rag serve --workers N`) before the workers start: their counts go to files
# in this directory, and `/metrics` on any worker reports the sum over all of them.
METRICS_DIR_VARIABLE: Final = "PROMETHEUS_MULTIPROC_DIR"  # the name prometheus_client reads

# Seconds; skills may call slow models, so the buckets reach five minutes.
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Seconds the event loop answered late: a healthy loop's lag is below a few milliseconds.
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The metrics of one app. Names and labels are documented in docs/operations.md.

    A worker alone keeps its counts in plain numbers (`tally`); workers that share their
    metrics write them to files through prometheus_client."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._shared_dir = os.environ.get(METRICS_DIR_VARIABLE)
        if self._shared_dir is None:  # process metrics of one worker would mislead
            ProcessCollector(registry=self.registry)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.http_requests = self._counter(
            "agentic_rag_http_requests",
            "HTTP requests answered, by route template, method and status code.",
            ["route", "method", "status"],
        )
        self.http_duration = self._histogram(
            "agentic_rag_http_request_duration_seconds",
            "Time from receiving a request to the end of its response (streams included).",
            ["route", "method"],
            buckets=_DURATION_BUCKETS,
        )
        self.jsonrpc_calls = self._counter(
            "agentic_rag_jsonrpc_calls",
            "A2A JSON-RPC calls by method and outcome: ok, or the JSON-RPC error code.",
            ["method", "outcome"],
        )
        self.task_transitions = self._counter(
            "agentic_rag_task_transitions",
            "Tasks entering a state (submitted, working, completed, ...).",
            ["state"],
        )
        self.skill_calls = self._counter(
            "agentic_rag_skill_calls",
            "Skill calls by skill, protocol (a2a, mcp) and outcome "
            "(ok, input_required, error, canceled, exception).",
            ["skill", "protocol", "outcome"],
        )
        self.skill_duration = self._histogram(
            "agentic_rag_skill_duration_seconds",
            "How long skill calls take, by skill and protocol.",
            ["skill", "protocol"],
            buckets=_DURATION_BUCKETS,
        )
        self.rate_limited = self._counter(
            "agentic_rag_rate_limited",
            "Requests refused by the rate limiter, by kind of credential.",
            ["credential_kind"],
        )
        self.rate_limits_uncounted = self._counter(
            "agentic_rag_rate_limits_uncounted",
            "Rate limit checks skipped because their store (REDIS_URL) failed: the requests "
            "were served without counting them, by check (credential, auth-failures).",
            ["check"],
        )
        self.peer_health_changes = self._counter(
            "agentic_rag_peer_health_changes",
            "Peers of the agent network changing health, by the new status (healthy, unhealthy).",
            ["status"],
        )

        self.graph_llm_calls = self._counter(
            "agentic_rag_graph_llm_calls",
            "LLM calls of the knowledge graph (extraction, summaries), by outcome (ok, error).",
            ["outcome"],
        )
        self.graph_llm_tokens = self._counter(
            "agentic_rag_graph_llm_tokens",
            "Tokens of the graph's LLM calls as the endpoint reports them, by kind "
            "(prompt, completion).",
            ["kind"],
        )
        self.graph_episode_duration = self._histogram(
            "agentic_rag_graph_episode_duration_seconds",
            "How long one attempt at extracting a queued episode takes, by outcome "
            "(done, retry, failed).",
            ["outcome"],
            buckets=_DURATION_BUCKETS,
        )
        self.loop_lag = self._histogram(
            "agentic_rag_event_loop_lag_seconds",
            "How much later than asked a task woke on the event loop, measured every half "
            "second: how long a request would have waited for the loop.",
            [],
            buckets=_LAG_BUCKETS,
        )

    def _counter(
        self, name: str, documentation: str, labelnames: list[str]
    ) -> Counter | Family[Count]:
        if self._shared_dir is None:
            return local_counter(self.registry, name, documentation, labelnames)
        return Counter(name, documentation, labelnames, registry=self.registry)

    def _histogram(
        self, name: str, documentation: str, labelnames: list[str], buckets: tuple[float, ...]
    ) -> Histogram | Family[Distribution]:
        if self._shared_dir is None:
            return local_histogram(self.registry, name, documentation, labelnames, buckets)
        return Histogram(name, documentation, labelnames, buckets=buckets, registry=self.registry)

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, cached: `labels()` checks and converts its values."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            # prometheus_client's metric without labels is its only series itself
            alone = not labels and not isinstance(metric, Family)
            found = self._children[key] = metric if alone else metric.labels(*labels)
        return found

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric of this app (of every worker)."""
        if self._shared_dir is None:
            return generate_latest(self.registry)
        workers = CollectorRegistry()
        MultiProcessCollector(workers, path=self._shared_dir)  # type: ignore[no-untyped-call]
        return generate_latest(workers)


# -- the metrics bound to the current context --------------------------------------------------

_CURRENT: ContextVar[Metrics | None] = ContextVar("agentic_rag_metrics", default=None)


def bind(metrics: Metrics) -> Token[Metrics | None]:
    """Make `metrics` the current ones in this context and in tasks created from it."""
    return _CURRENT.set(metrics)


def unbind(token: Token[Metrics | None]) -> None:
    _CURRENT.reset(token)


def record_rate_limited(credential_kind: str) -> None:
    """The rate limiter refused a request made with this kind of credential (api-key, jwt...)."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.rate_limited, credential_kind).inc()


def record_rate_limits_uncounted(check: str) -> None:
    """A rate limit `check` (credential, auth-failures) was skipped: its store failed."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.rate_limits_uncounted, check).inc()


def record_peer_health(status: str) -> None:
    """A peer of the agent network became `status` (counted once, by the worker that judged)."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.peer_health_changes, status).inc()


def record_graph_llm_call(outcome: str, prompt_tokens: int, completion_tokens: int) -> None:
    """One LLM call of the graph ended (`ok` or `error`), with the tokens it reported."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.graph_llm_calls, outcome).inc()
        for kind, tokens in (("prompt", prompt_tokens), ("completion", completion_tokens)):
            if tokens:
                metrics.child(metrics.graph_llm_tokens, kind).inc(tokens)


def record_graph_episode(outcome: str, seconds: float) -> None:
    """An attempt at a queued episode ended: `done`, `retry` (failed, tried again) or `failed`."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.graph_episode_duration, outcome).observe(seconds)


def record_task_state(state: str) -> None:
    """A task moved into `state` (its A2A state's name: working, completed...)."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.task_transitions, state).inc()


def record_skill_call(skill: str, protocol: str, outcome: str, seconds: float) -> None:
    """One call of `skill` over `protocol` ended with `outcome` (skills/metering.py names it)
    after `seconds`."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.skill_calls, skill, protocol, outcome).inc()
        metrics.child(metrics.skill_duration, skill, protocol).observe(seconds)


def record_loop_lag(seconds: float) -> None:
    """The event loop woke a task `seconds` later than it asked (observability/loop_lag.py)."""
    metrics = _CURRENT.get()
    if metrics is not None:
        metrics.child(metrics.loop_lag).observe(seconds)
