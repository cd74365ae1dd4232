"""This worker among the others that share its database.

Several workers (processes, or replicas on other machines) may serve one PostgreSQL. Each:

- **holds a lease**: a session advisory lock on its own connection, keyed by its worker id.
  PostgreSQL drops the lock when the process dies or its connection is lost, so "alive"
  needs no heartbeat table and no clock. Tasks record the worker that writes them; a sweep
  (`TaskService.recover`, at start and every `sweep_seconds`) takes over the submitted and
  working tasks of workers that hold no lock, sparing those it saw holding one within the
  last `lease_seconds` (`spared`): a live worker whose connection dropped (the database
  restarted, the network failed) has that long to take its lease again;
- **knows when it may have lost its lease**: the moment its connection drops, `holds_lease`
  turns false (the runner holds its tasks' side effects, `until_held`), and it tries to take
  the lease again at once and every half second, before sweeping for anyone else's tasks; once
  it has, it tells `on_renewed` (which drops the tasks another worker took over meanwhile) and
  takes over nobody for `lease_seconds`, the time every other worker has to renew its own;
- **listens** on that connection for task progress (every journal commit notifies the tasks
  it wrote), for cancel requests and for handed-on messages, so that a follower, a
  `tasks/cancel` or a message reaching this worker for a task another worker runs is woken
  when that task changes, and the worker that runs it is asked to stop it, or given the
  message.
"""

import asyncio
import base64
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import asyncpg
import orjson

from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.storage.database import Database

log = logging.getLogger(__name__)

# The first key of every worker's advisory lock (the second is the worker id): "agwk".
WORKER_LOCK_CLASS = 0x6167776B
# The channels between workers: tasks committed (the task store notifies it with every
# journal commit), cancel requests, handed-on messages.
TASK_EVENTS_CHANNEL = "agentic_rag_task_events"
CANCEL_CHANNEL = "agentic_rag_task_cancel"
MESSAGE_CHANNEL = "agentic_rag_task_message"
# A handed-on message travels base64-encoded in pieces of this many characters: each piece's
# notification stays under PostgreSQL's limit of 8000 bytes per payload.
_PIECE_CHARS = 6000
# Pause between attempts to take the lease again while the database does not answer.
RENEW_RETRY_SECONDS = 0.5
# The workers that hold their lease now, on this database.
_LIVE_WORKERS = """
SELECT objid::bigint AS worker FROM pg_locks
WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""

TaskKey = tuple[str, str]  # (tenant, task id)


class _Incoming:
    """A handed-on message whose pieces are arriving."""

    def __init__(self, tenant: str, task_id: str, count: int) -> None:
        self.tenant, self.task_id = tenant, task_id
        self.pieces: list[str | None] = [None] * count
        self.missing = count


class Cluster:
    """The lease, the listener and the sweep of one worker: `start`, `run`, `stop`, `leave`."""

    _conn: asyncpg.Connection  # holds the lease from `start` to `leave`

    def __init__(self, database: Database, *, lease_seconds: float = 30.0) -> None:
        # The id is drawn now (the task store and the graph's queue write it); `start` locks it.
        self._database, self.worker = database, secrets.randbelow(2**31 - 1) + 1
        self.lease_seconds = lease_seconds
        self._held = asyncio.Event()  # this worker holds its lease
        self._renewed_at = -float("inf")  # when it last took it again after losing it
        self._seen: dict[int, float] = {}  # other workers, when last seen holding their lease
        self._renewer: asyncio.Task[None] | None = None
        self._on_renewed: Callable[[], Awaitable[object]] | None = None
        self._leaving = False
        self._watchers: dict[TaskKey, set[asyncio.Event]] = {}
        self._on_cancel: Callable[[str, str], None] = lambda tenant, task_id: None
        self._runs_here: Callable[[str, str], bool] = lambda tenant, task_id: False
        self._on_message: Callable[[str, str, bytes], None] = lambda tenant, task_id, raw: None
        self._incoming: dict[str, _Incoming] = {}  # by the token of the handing-on
        self._sweeper: asyncio.Task[None] | None = None
        self._busy = asyncio.Lock()

    async def start(self) -> None:
        """Take the lease of this worker's id (on the started database), and listen."""
        conn = await asyncpg.connect(self._database.dsn)
        try:
            if not await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, $2)", WORKER_LOCK_CLASS, self.worker
            ):  # one chance in 2**31 per live worker
                raise RuntimeError(f"worker id {self.worker} is taken by a live worker: restart")
            self._conn = conn
            await self._listen()
        except BaseException:
            await conn.close()
            raise
        self._held.set()
        log.info("worker %d joined", self.worker)

    def run(
        self,
        *,
        on_cancel: Callable[[str, str], None],
        sweep: Callable[[], Awaitable[object]],
        sweep_seconds: float,
        on_renewed: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Start answering cancel requests and sweeping for tasks of workers that are gone;
        `on_renewed` runs each time this worker has taken its lease again after losing it."""
        self._on_cancel, self._on_renewed = on_cancel, on_renewed
        self._sweeper = asyncio.create_task(self._sweep(sweep, sweep_seconds), name="sweeper")

    def take_messages(
        self, *, runs_here: Callable[[str, str], bool], take: Callable[[str, str, bytes], None]
    ) -> None:
        """Receive the messages other workers hand on (`hand_message`) for the tasks that
        `runs_here` says run on this worker, and give each, whole, to `take`."""
        self._runs_here, self._on_message = runs_here, take

    async def stop(self) -> None:
        """Stop sweeping (before this worker's own tasks are stopped)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None

    async def leave(self) -> None:
        """Give the lease up: only once this worker's tasks are settled and stored."""
        self._leaving = True
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        await self._conn.close()

    @property
    def holds_lease(self) -> bool:
        """Whether this worker surely holds its lease: false from the moment its connection
        dropped until it has taken the lease again."""
        return self._held.is_set()

    async def until_held(self) -> None:
        """Return once this worker holds its lease (at once, as a rule)."""
        await self._held.wait()

    async def spared(self) -> list[int] | None:
        """The workers whose tasks a sweep must not take over now, whether or not they hold
        their lock this instant: those seen holding it within `lease_seconds`. None: take over
        nobody now, since this worker holds no lease, or took it again less than
        `lease_seconds` ago, when the others may be taking theirs again too."""
        if not self.holds_lease or time.monotonic() - self._renewed_at < self.lease_seconds:
            return None
        live = await self._database.fetch(_LIVE_WORKERS, WORKER_LOCK_CLASS)
        now = time.monotonic()
        for row in live:
            self._seen[int(row["worker"])] = now
        self._seen = {w: seen for w, seen in self._seen.items() if now - seen < self.lease_seconds}
        return sorted(self._seen)

    # -- the lease -------------------------------------------------------------------------

    async def _listen(self) -> None:
        self._conn.add_termination_listener(self._lost)
        await self._conn.add_listener(TASK_EVENTS_CHANNEL, self._task_events)
        await self._conn.add_listener(CANCEL_CHANNEL, self._cancel_request)
        await self._conn.add_listener(MESSAGE_CHANNEL, self._message_piece)

    async def _sweep(self, sweep: Callable[[], Awaitable[object]], seconds: float) -> None:
        outage = RepeatedFailure(log, f"worker {self.worker}: the sweep")
        while True:
            await asyncio.sleep(seconds)
            if not self.holds_lease:  # the renewer is at it; nobody's tasks are taken till then
                continue
            try:
                await sweep()
                outage.succeeded()
            except Exception:  # the database may be down for a while: try again next time
                outage.failed()

    def _lost(self, conn: object) -> None:
        """The connection that holds the lease dropped: the lease may be lost. Take it again
        at once (`_keep_renewing`)."""
        if self._leaving or conn is not self._conn:
            return
        self._held.clear()
        log.warning(
            "worker %d: lost the database connection that holds its lease; its tasks' side"
            " effects wait until it holds the lease again",
            self.worker,
        )
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._keep_renewing(), name="lease renewer")

    async def _keep_renewing(self) -> None:
        outage = RepeatedFailure(log, f"worker {self.worker}: taking its lease again")
        while True:
            try:
                async with self._busy:
                    if self._conn.is_closed():
                        await self._renew()
                break
            except Exception:  # the database is still down: try again shortly
                outage.failed()
                await asyncio.sleep(RENEW_RETRY_SECONDS)
        outage.succeeded()
        self._renewed_at = time.monotonic()
        if self._on_renewed is not None:  # before the tasks here go on: some may not be ours
            try:
                await self._on_renewed()
            except Exception:
                log.exception("worker %d: after taking its lease again", self.worker)
        self._held.set()
        log.warning("worker %d: holds its lease again", self.worker)

    async def _renew(self) -> None:
        """Take the lease again on a new connection, after the database dropped the old one.

        Other workers spare this worker's tasks for `lease_seconds` after they last saw its
        lease; if it was gone longer, they may have taken its running tasks over, and
        `on_renewed` drops those here.
        """
        conn = await asyncpg.connect(self._database.dsn)
        try:
            if not await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, $2)", WORKER_LOCK_CLASS, self.worker
            ):
                raise RuntimeError(f"worker id {self.worker} is taken")
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        self._incoming.clear()  # pieces lost with the old connection never arrive
        await self._listen()

    # -- task progress and cancel requests between workers ----------------------------------

    @contextmanager
    def watch(self, tenant: str, task_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever any worker commits events of the task, while the block runs.

        Clear it before reading the task, then wait on it: no commit is missed.
        """
        changed = asyncio.Event()
        key = (tenant, task_id)
        self._watchers.setdefault(key, set()).add(changed)
        try:
            yield changed
        finally:
            watchers = self._watchers[key]
            watchers.discard(changed)
            if not watchers:
                del self._watchers[key]

    async def request_cancel(self, tenant: str, task_id: str) -> None:
        """Ask every worker to cancel the task; the one that runs it does."""
        payload = orjson.dumps([tenant, task_id]).decode()
        async with self._busy:  # one query at a time on a connection
            if self._conn.is_closed():
                await self._renew()
            await self._conn.execute("SELECT pg_notify($1, $2)", CANCEL_CHANNEL, payload)

    async def hand_message(self, tenant: str, task_id: str, message: bytes) -> None:
        """Hand a client's message (its JSON) to the worker that runs the task.

        Every worker hears it; the one that runs the task takes it. Its pieces are notified in
        one statement, so they arrive together, after a header that names the task.
        """
        token = secrets.token_hex(8)
        encoded = base64.b64encode(message).decode()
        pieces = [encoded[i : i + _PIECE_CHARS] for i in range(0, len(encoded), _PIECE_CHARS)]
        payloads = [orjson.dumps([token, tenant, task_id, len(pieces)]).decode()]
        payloads += [orjson.dumps([token, i, piece]).decode() for i, piece in enumerate(pieces)]
        async with self._busy:
            if self._conn.is_closed():
                await self._renew()
            await self._conn.execute(
                "SELECT count(pg_notify($1, payload)) FROM unnest($2::text[]) AS payload",
                MESSAGE_CHANNEL,
                payloads,
            )

    def _task_events(self, conn: object, pid: int, channel: str, payload: object) -> None:
        if not self._watchers:  # the usual case: nobody here follows another worker's task
            return
        assert isinstance(payload, str)
        for tenant, task_id in orjson.loads(payload):
            for changed in self._watchers.get((tenant, task_id), ()):
                changed.set()

    def _cancel_request(self, conn: object, pid: int, channel: str, payload: object) -> None:
        assert isinstance(payload, str)
        tenant, task_id = orjson.loads(payload)
        self._on_cancel(tenant, task_id)

    def _message_piece(self, conn: object, pid: int, channel: str, payload: object) -> None:
        assert isinstance(payload, str)
        match orjson.loads(payload):
            case [str(token), str(tenant), str(task_id), int(count)]:  # the header
                if self._runs_here(tenant, task_id):
                    self._incoming[token] = _Incoming(tenant, task_id, count)
            case [str(token), int(index), str(piece)] if token in self._incoming:
                incoming = self._incoming[token]
                incoming.pieces[index] = piece
                incoming.missing -= 1
                if not incoming.missing:
                    del self._incoming[token]
                    raw = base64.b64decode("".join(p for p in incoming.pieces if p))
                    self._on_message(incoming.tenant, incoming.task_id, raw)
