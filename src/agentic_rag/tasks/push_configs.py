"""The push-notification configs of tasks: checked, stored, listed and deleted; and the
webhooks told when a task settles (delivery itself is `PushNotifier`'s)."""

from agentic_rag.ids import new_id
from agentic_rag.schema.a2a import Task
from agentic_rag.schema.compat import PushConfig
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.tasks.active import ActiveTask
from agentic_rag.tasks.errors import TaskRequestError
from agentic_rag.tasks.push import PushNotifier, validate_config
from agentic_rag.tasks.store import TaskStore


class PushConfigs:
    def __init__(self, store: TaskStore, notifier: PushNotifier | None, guard: SSRFGuard) -> None:
        self._store, self._notifier, self._guard = store, notifier, guard

    def check(self, config: PushConfig) -> None:
        """Refuse a config whose URL may not be called (`TaskRequestError`), before storing."""
        try:
            validate_config(config, self._guard)
        except ValueError as exc:
            raise TaskRequestError(f"pushNotificationConfig refused: {exc}") from None

    async def save(self, tenant: str, task_id: str, config: PushConfig) -> PushConfig:
        """Store a checked config; one without an id gets one."""
        if config.id is None:
            config = config.model_copy(update={"id": new_id()})
        await self._store.put_push_config(tenant, task_id, config)
        return config

    async def of(self, tenant: str, task_id: str) -> list[PushConfig]:
        return await self._store.push_configs(tenant, task_id)

    async def delete(self, tenant: str, task_id: str, config_id: str) -> None:
        """Delete one config of a task; a config id the task does not have is deleted already
        (deletes are idempotent, so a retried delete succeeds)."""
        await self._store.delete_push_config(tenant, task_id, config_id)

    async def settled(self, active: ActiveTask) -> None:
        """Send the task to its webhooks; called once it is durably final or paused."""
        if self._notifier is None or active.journaled is None or not active.journaled.push:
            return  # the commit that settled the task found no push configs
        configs = await self._store.push_configs(active.tenant, active.task.id)
        if configs:
            self._notifier.notify(active.task, configs)

    async def tell(self, task: Task, tenant: str, url: str) -> None:
        """Send `task` as it is now to its webhook at `url`, if it has one."""
        if self._notifier is None:
            return
        configs = [c for c in await self._store.push_configs(tenant, task.id) if c.url == url]
        if configs:
            self._notifier.notify(task, configs[:1])
