"""What peers send beyond v0.2.1, accepted alongside it (docs/a2a-notes.md §9, §12).

- `acceptedOutputModes` is optional (0.2.6; the a2a-sdk 1.x client omits it).
- Push configs carry an `id`, so a task can have several (0.2.5), and `get`/`delete` name one.
- A message has at least one part, and `historyLength` is not negative (our checks, §12.1).
"""

from typing import Literal

from pydantic import Field, PrivateAttr, field_validator

from agentic_rag.schema import a2a as schema
from agentic_rag.schema.base import A2AModel

# What a push notification's body is: the Task (0.2.1, 0.3) or a 1.0 StreamResponse.
type PushBody = Literal["task", "stream-response"]


class PushConfig(schema.PushNotificationConfig):
    id: str | None = None
    # Set by the adapter that took the config, never by a client (so not a field).
    _body: PushBody = PrivateAttr("task")

    @property
    def body(self) -> PushBody:
        return self._body

    def delivering(self, body: PushBody) -> "PushConfig":
        """This config, its notifications' body `body`."""
        config = self.model_copy()
        config._body = body
        return config


class TaskPushConfig(schema.TaskPushNotificationConfig):
    push_notification_config: PushConfig = Field(..., alias="pushNotificationConfig")


class SendConfiguration(schema.MessageSendConfiguration):
    accepted_output_modes: list[str] | None = Field(None, alias="acceptedOutputModes")  # type: ignore[assignment]
    push_notification_config: PushConfig | None = Field(None, alias="pushNotificationConfig")

    @field_validator("history_length")
    @classmethod
    def _not_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("historyLength must not be negative")
        return value


class SendParams(schema.MessageSendParams):
    configuration: SendConfiguration | None = None

    @field_validator("message")
    @classmethod
    def _has_parts(cls, message: schema.Message) -> schema.Message:
        if not message.parts:
            raise ValueError("a message must have at least one part")
        return message


class QueryParams(schema.TaskQueryParams):
    @field_validator("history_length")
    @classmethod
    def _not_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("historyLength must not be negative")
        return value


class PushConfigQuery(A2AModel):
    """`tasks/pushNotificationConfig/get` and `/list` params: 0.2.1's `{id}`, 0.2.5's extra id."""

    id: str
    push_notification_config_id: str | None = Field(None, alias="pushNotificationConfigId")


class PushConfigDelete(A2AModel):
    id: str
    push_notification_config_id: str = Field(..., alias="pushNotificationConfigId")
