"""The operators' REST routes of the agent network, under `/a2a/` (spec/network-openapi.json).

They sit behind the same authentication, rate limits and tenant isolation as everything else
(the middleware gives every request its principal; every query is the principal's tenant's),
need the scope `read` (GET) or `write` (POST, DELETE), and answer errors as RFC 7807 problem
details (`schema/problems.py`). A route that does what a skill does is that skill (`SKILLS`):
a credential that selects groups of tools needs the skill's group, by the rule of every door
(`tasks/calls.permit`). The delegation routes hand over to the `DelegationService`.
"""

import logging
from collections.abc import Awaitable, Callable

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import Receive, Scope, Send

from agentic_rag.config import Settings
from agentic_rag.network.delegation import DelegationRequest, DelegationService
from agentic_rag.network.errors import DelegationRefused
from agentic_rag.network.records import (
    AgentList,
    DelegatedTask,
    DelegationAccepted,
    Heartbeat,
    Registered,
    RegisterRequest,
    SessionList,
    agent_record,
    discover,
    session_record,
)
from agentic_rag.network.registration import RegistrationError
from agentic_rag.network.service import Network
from agentic_rag.schema.problems import Problem, problem_response
from agentic_rag.security.principal import principal_of
from agentic_rag.security.ssrf import UnsafeURLError
from agentic_rag.skills import SkillRegistry
from agentic_rag.tasks.calls import permit
from agentic_rag.tasks.errors import (
    SkillForbiddenError,
    TaskError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

log = logging.getLogger(__name__)

PREFIX = "/a2a"
MAX_BODY_BYTES = 1024 * 1024
MAX_WAIT_SECONDS = 300.0
# Every method reaches `_endpoint`, which answers those a path does not serve with a problem.
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
# The skill each route is, by method and path under PREFIX (docs/network.md): its caller needs
# that skill's group of tools, as over A2A and MCP. The routes not named read or cancel the
# tenant's tasks and sessions, which no door limits by group (as tasks/get and tasks/cancel).
SKILLS: dict[tuple[str, str], str] = {
    ("POST", "/agents/register"): "register_agent",
    ("POST", "/agents/{agent_id}/heartbeat"): "register_agent",  # a registration kept alive
    ("GET", "/agents"): "list_agents",
    ("GET", "/agents/{agent_id}"): "list_agents",
    ("DELETE", "/agents/{agent_id}"): "remove_agent",
    ("GET", "/capabilities"): "find_capability",
    ("POST", "/tasks/delegate"): "delegate_task",
}


# -- the routes ---------------------------------------------------------------------------------

type Handler = Callable[[Request], Awaitable[Response]]


class NetworkRoutes:
    def __init__(
        self,
        network: Network,
        delegation: DelegationService,
        registry: SkillRegistry,
        settings: Settings,
    ) -> None:
        self._network, self._delegation = network, delegation
        self._registry, self._settings = registry, settings

    def routes(self) -> list[BaseRoute]:
        paths: list[tuple[str, dict[str, Handler]]] = [
            ("/agents/register", {"POST": self.register}),
            ("/agents", {"GET": self.list_agents}),
            ("/agents/{agent_id}", {"GET": self.get_agent, "DELETE": self.remove_agent}),
            ("/agents/{agent_id}/heartbeat", {"POST": self.heartbeat}),
            ("/capabilities", {"GET": self.capabilities}),
            ("/tasks/delegate", {"POST": self.delegate}),
            ("/tasks/{task_id}/result", {"GET": self.result}),
            ("/tasks/{task_id}", {"DELETE": self.cancel}),
            ("/sessions", {"GET": self.list_sessions}),
            ("/sessions/{context_id}", {"GET": self.get_session}),
        ]
        router = Router(
            [
                Route(path, self._endpoint(path, handlers), methods=_METHODS)
                for path, handlers in paths
            ],
            default=_not_found,
        )
        return [Mount(PREFIX, app=router)]

    # -- registry and health ------------------------------------------------------------------

    async def register(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        body = _parse(RegisterRequest, await _body(request))
        registrar = self._network.registrar
        try:
            if body.card_url is not None:
                peer = await registrar.from_card_url(principal.tenant, body.card_url)
            elif body.card is not None:
                peer = await registrar.from_card(principal.tenant, body.card)
            else:
                assert body.agent_type and body.endpoint_url and body.capabilities
                peer = await registrar.from_declaration(
                    principal.tenant, body.agent_type, body.endpoint_url, body.capabilities
                )
        except RegistrationError as exc:
            status = 502 if exc.kind == "card-unreachable" else 422
            raise Problem(status, exc.kind, str(exc), field=exc.field) from None
        log.info("peer %s (%s) registered at %s", peer.id, peer.name, peer.endpoint)
        registered = Registered(
            agent_id=peer.id,
            registered_at=peer.registered_at,
            agent=agent_record(peer),
            heartbeat_interval_seconds=self._settings.peer_heartbeat_interval_seconds,
        )
        return _json(registered, 201)

    async def heartbeat(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        agent_id = request.path_params["agent_id"]
        peer = await self._network.health.heartbeat(principal.tenant, agent_id)
        if peer is None:
            raise _no_agent(agent_id)
        assert peer.last_heartbeat is not None
        settings = self._settings
        return _json(
            Heartbeat(
                agent_id=peer.id,
                health_status=peer.health,
                last_heartbeat=peer.last_heartbeat,
                heartbeat_interval_seconds=settings.peer_heartbeat_interval_seconds,
                heartbeat_timeout_seconds=settings.peer_heartbeat_timeout_seconds,
            )
        )

    async def list_agents(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        capability = _query(request, "capability")
        healthy_only = _flag(request, "healthy_only", default=False)
        peers = await self._network.peers.find(
            principal.tenant, capability, healthy_only=healthy_only
        )
        return _json(AgentList(agents=[agent_record(p) for p in peers]))

    async def get_agent(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        agent_id = request.path_params["agent_id"]
        peer = await self._network.peers.get(principal.tenant, agent_id)
        if peer is None:
            raise _no_agent(agent_id)
        return _json(agent_record(peer))

    async def remove_agent(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        agent_id = request.path_params["agent_id"]
        if not await self._network.peers.remove(principal.tenant, agent_id):
            raise _no_agent(agent_id)
        log.info("peer %s removed", agent_id)
        return Response(status_code=204)

    async def capabilities(self, request: Request) -> Response:
        """This agent's and every healthy peer's capabilities, or those named `capability`."""
        principal = principal_of(request.scope)
        offered = await discover(
            self._network.peers,
            self._registry,
            self._settings.agent_name,
            principal.tenant,
            _query(request, "capability"),
        )
        return _json(offered)

    # -- delegation (the DelegationService does the work) ---------------------------------------

    async def delegate(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        body = _parse(DelegationRequest, await _body(request))
        try:
            task_id = await self._delegation.delegate(principal, body)
        except DelegationRefused as exc:
            raise Problem(422, "delegation-refused", str(exc)) from None
        except UnsafeURLError as exc:
            raise Problem(
                422,
                "unsafe-url",
                f"{exc}{exc.hint('AGENTIC_RAG_PUSH_ALLOW_PRIVATE')}",
            ) from None
        except TaskError as exc:
            raise _task_problem(exc) from None
        return _json(DelegationAccepted(task_id=task_id), 202)

    async def result(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        task_id = request.path_params["task_id"]
        wait = _number(request, "wait_seconds", default=0.0, high=MAX_WAIT_SECONDS)
        try:
            task = await self._delegation.result(principal, task_id, wait)
        except TaskError as exc:
            raise _task_problem(exc) from None
        if task is None:
            raise Problem(
                408,
                "result-timeout",
                f"task {task_id} did not finish within {wait:g} s; ask again later",
                task_id=task_id,
            )
        return _json(
            DelegatedTask(
                task_id=task.id,
                status=task.status.state.value,
                task=task.model_dump(mode="json", by_alias=True, exclude_none=True),
            )
        )

    async def cancel(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        task_id = request.path_params["task_id"]
        try:
            task = await self._delegation.cancel(principal, task_id)
        except TaskError as exc:
            raise _task_problem(exc) from None
        return _json(
            DelegatedTask(
                task_id=task.id,
                status=task.status.state.value,
                task=task.model_dump(mode="json", by_alias=True, exclude_none=True),
            )
        )

    # -- sessions -----------------------------------------------------------------------------

    async def list_sessions(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        sessions = await self._network.sessions.list(principal.tenant)
        return _json(SessionList(sessions=[session_record(s) for s in sessions]))

    async def get_session(self, request: Request) -> Response:
        principal = principal_of(request.scope)
        context_id = request.path_params["context_id"]
        session = await self._network.sessions.get(principal.tenant, context_id)
        if session is None:
            raise Problem(
                404, "not-found", f"no active session {context_id!r} (it may have expired)"
            )
        return _json(session_record(session, whole=True))

    # -- the door of every route ------------------------------------------------------------

    def _endpoint(self, path: str, handlers: dict[str, Handler]) -> Handler:
        """One endpoint per path: the handler of the request's method once the caller may call
        it (`_allow`), a 405 problem for other methods, and any error as a problem."""
        allowed = ", ".join(sorted(handlers))

        async def endpoint(request: Request) -> Response:
            handler = handlers.get(request.method)
            try:
                if handler is None:
                    raise Problem(
                        405,
                        "method-not-allowed",
                        f"{request.method} is not allowed here; allowed: {allowed}",
                        headers={"Allow": allowed},
                    )
                self._allow(request, SKILLS.get((request.method, path)))
                return await handler(request)
            except Problem as problem:
                return problem.response(request.url.path)
            except ClientDisconnect:
                return Response(status_code=400)
            except Exception:
                log.exception("internal error answering %s %s", request.method, request.url.path)
                return problem_response(
                    500,
                    "internal",
                    "internal error; the server log has details",
                    instance=request.url.path,
                )

        return endpoint

    def _allow(self, request: Request, skill: str | None) -> None:
        """Nothing, if the caller's credential has the method's scope (`read` to GET, else
        `write`) and, for a route that is `skill`, that skill's group of tools; else the
        problem that says why."""
        principal = principal_of(request.scope)
        door = f"{request.method} {request.url.path}"
        scope = "read" if request.method == "GET" else "write"
        if not principal.allows(scope):
            raise Problem(
                403, "forbidden", f"this credential lacks the scope {scope!r} that {door} needs"
            )
        if skill is None or principal.groups is None:
            return
        found = self._registry.get(skill)
        if found is None:
            raise Problem(
                403, "forbidden", f"{door} is the skill {skill!r}, which this agent does not offer"
            )
        try:
            permit(principal.groups, found)
        except SkillForbiddenError as exc:
            raise Problem(
                403, "forbidden", f"{exc.message}; {door} is that skill", **exc.data
            ) from None


# -- what the routes share -----------------------------------------------------------------------


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    response = problem_response(
        404, "not-found", f"no route {scope['path']}", instance=scope["path"]
    )
    await response(scope, receive, send)


async def _body(request: Request) -> bytes:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise Problem(
            415,
            "unsupported-media-type",
            f"Content-Type must be application/json, not {content_type or 'missing'!r}",
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise Problem(413, "too-large", f"the body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse[M: BaseModel](model: type[M], body: bytes) -> M:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Problem(400, "invalid-json", f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise Problem(422, "validation", "the body must be a JSON object")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]) or "body", "problem": e["msg"]}
            for e in exc.errors(include_url=False)
        ]
        summary = "; ".join(f"{e['field']}: {e['problem']}" for e in errors[:5])
        raise Problem(422, "validation", f"invalid request: {summary}", errors=errors) from None


def _query(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value or None


def _flag(request: Request, name: str, *, default: bool) -> bool:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise Problem(422, "validation", f"{name} must be true or false, not {value!r}")


def _number(request: Request, name: str, *, default: float, high: float) -> float:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 <= number <= high:  # NaN fails too
        raise Problem(
            422, "validation", f"{name} must be a number from 0 to {high:g}, not {value!r}"
        )
    return number


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status, media_type="application/json")


def _no_agent(agent_id: str) -> Problem:
    return Problem(404, "not-found", f"no agent {agent_id!r} is registered for this tenant")


def _task_problem(error: TaskError) -> Problem:
    if isinstance(error, TaskNotFoundError):
        return Problem(404, "not-found", error.message)
    if isinstance(error, TaskNotCancelableError):
        return Problem(409, "not-cancelable", error.message)
    return Problem(422, "delegation-refused", error.message)
