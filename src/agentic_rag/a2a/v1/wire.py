"""The engine's records (A2A 0.2.1 shape) as A2A 1.0 JSON, and 1.0 requests as what the
engine takes. Nothing is restated: 0.2.1 records are read as a2a-sdk's 0.3 models (the same
fields), converted by a2a-sdk's `compat.v0_3.conversions` to the 1.0 proto messages, and
written by protobuf's JSON mapping (camelCase, `TASK_STATE_*`, timestamps in UTC with `Z`)."""

import functools
from dataclasses import dataclass
from typing import Any

import orjson
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as v03
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, MessageToJson, ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, ValidationError

from agentic_rag.a2a.errors import InvalidParamsError
from agentic_rag.schema.compat import PushConfig, SendParams
from agentic_rag.tasks.store import Event

JSONObject = dict[str, Any]


def parse[P: ProtoMessage](params: Any, message: type[P]) -> P:
    """A 1.0 request's params as its proto message; the JSON mapping accepts the camelCase
    names and the proto names alike, and unknown fields are ignored (spec §5.6)."""
    if not isinstance(params, dict):
        raise InvalidParamsError("params must be an object")
    try:
        parsed = ParseDict(params, message())
    except (ParseError, ValueError, TypeError) as exc:
        # Lenient about unknown fields only: protobuf's lenient parse would also drop an
        # unknown enum value (status TASK_STATE_RUNNING) as if it were absent.
        if "enum" in str(exc).lower():
            raise InvalidParamsError(f"Invalid parameters: {exc}") from None
        try:
            parsed = ParseDict(params, message(), ignore_unknown_fields=True)
        except (ParseError, ValueError, TypeError) as exc:
            raise InvalidParamsError(f"Invalid parameters: {exc}") from None
    if missing := _missing(parsed):
        raise InvalidParamsError(
            f"Invalid parameters: {', '.join(missing)} required",
            data={"fields": ", ".join(missing)},
        )
    return parsed


def _required(field: Any) -> bool:
    """Whether the proto marks the field `(google.api.field_behavior) = REQUIRED` (a field
    descriptor: protobuf's C and Python implementations have different types)."""
    for option, value in field.GetOptions().ListFields():
        if option.full_name == "google.api.field_behavior" and option.enum_type is not None:
            return option.enum_type.values_by_name["REQUIRED"].number in value
    return False


@dataclass(frozen=True, slots=True)
class _Field:
    """What `_missing` needs to know of one field, read once per message type."""

    name: str
    json_name: str
    required: bool
    repeated: bool
    is_message: bool
    nested: bool  # a message of ours to look into (not Struct, Timestamp or a map)


@functools.cache
def _fields(descriptor: Any) -> tuple[_Field, ...]:
    """The fields of a message type as `_missing` walks them (descriptors are immutable, and
    reading a field's options costs more than the walk itself)."""
    fields = []
    for field in descriptor.fields:
        nested = field.message_type
        ours = nested is not None and not (
            nested.full_name.startswith("google.protobuf.") or nested.GetOptions().map_entry
        )
        fields.append(
            _Field(
                field.name,
                field.json_name,
                _required(field),
                field.is_repeated,
                nested is not None,
                ours,
            )
        )
    return tuple(fields)


def _missing(message: ProtoMessage, path: str = "") -> list[str]:
    """The fields the proto marks REQUIRED (google.api.field_behavior) that `message` or a
    message in it leaves unset, empty, or at the unspecified enum value; and parts without
    content (a Part is exactly one of text, raw, url, data: spec §4.1.6)."""
    missing: list[str] = []
    if isinstance(message, pb.Part) and message.WhichOneof("content") is None:
        missing.append(f"{path}text, raw, url or data" if path else "content")
    for field in _fields(message.DESCRIPTOR):
        name = path + field.json_name
        if field.repeated:
            values = getattr(message, field.name)
            if field.required and not values:
                missing.append(name)
            if field.nested:
                for i, value in enumerate(values):
                    missing += _missing(value, f"{name}[{i}].")
        elif field.is_message:
            if message.HasField(field.name):
                if field.nested:
                    missing += _missing(getattr(message, field.name), name + ".")
            elif field.required:
                missing.append(name)
        elif field.required and not getattr(message, field.name):
            missing.append(name)
    return missing


def to_json(message: ProtoMessage) -> JSONObject:
    data: JSONObject = MessageToDict(message)
    if isinstance(message, pb.ListTasksResponse):
        # Required even when empty (spec §3.1.4: nextPageToken "" on the last page), which
        # the JSON mapping leaves out as proto3 defaults.
        for field, empty in (
            ("tasks", []),
            ("nextPageToken", ""),
            ("pageSize", 0),
            ("totalSize", 0),
        ):
            data.setdefault(field, empty)
    return data


def dumps(message: ProtoMessage) -> bytes:
    return orjson.dumps(to_json(message))


def _v03[M: BaseModel](model: type[M], record: BaseModel | JSONObject) -> M:
    data = (
        record.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(record, BaseModel)
        else record
    )
    return model.model_validate(data)


def task(record: BaseModel | JSONObject) -> pb.Task:
    """A task record (schema.a2a.Task or its JSON) as the 1.0 Task."""
    return conversions.to_core_task(_v03(v03.Task, record))


def message(record: BaseModel | JSONObject) -> pb.Message:
    return conversions.to_core_message(_v03(v03.Message, record))


def stream_response(record: JSONObject) -> pb.StreamResponse:
    """One event of the engine's streams (a Task, a Message, a status or artifact update, by
    its 0.2.1 `kind`) as the 1.0 StreamResponse that wraps it."""
    kind = record.get("kind")
    if kind == "task":
        return pb.StreamResponse(task=task(record))
    if kind == "message":
        return pb.StreamResponse(message=message(record))
    if kind == "status-update":
        update = _v03(v03.TaskStatusUpdateEvent, record)
        return pb.StreamResponse(status_update=conversions.to_core_task_status_update_event(update))
    if kind == "artifact-update":
        artifact = _v03(v03.TaskArtifactUpdateEvent, record)
        return pb.StreamResponse(
            artifact_update=conversions.to_core_task_artifact_update_event(artifact)
        )
    raise ValueError(f"an event of unknown kind {kind!r}")


def event_response(event: Event) -> pb.StreamResponse:
    return stream_response(orjson.loads(event.json))


def send_params(request: pb.SendMessageRequest) -> SendParams:
    """A 1.0 SendMessageRequest as the engine's send parameters (`returnImmediately` is the
    opposite of 0.x's `blocking`)."""
    if not request.HasField("message"):
        raise InvalidParamsError("Invalid parameters: message is required")
    compat = v03.MessageSendParams(
        message=conversions.to_compat_message(request.message),
        configuration=conversions.to_compat_send_message_configuration(request.configuration),
        metadata=MessageToDict(request.metadata) if request.HasField("metadata") else None,
    )
    try:
        send = SendParams.model_validate(
            compat.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
    except ValidationError as exc:
        summary = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidParamsError(f"Invalid parameters: {summary}") from None
    config = send.configuration
    if config is not None and config.push_notification_config is not None:
        pushed = config.push_notification_config.delivering("stream-response")
        config.push_notification_config = pushed
    return send


def push_config(config: pb.TaskPushNotificationConfig) -> PushConfig:
    """A 1.0 push config (flat: url, token, authentication on the task's config) as the
    engine's."""
    compat = conversions.to_compat_push_notification_config(config)
    try:
        return PushConfig.model_validate(
            compat.model_dump(mode="json", by_alias=True, exclude_none=True)
        ).delivering("stream-response")
    except ValidationError as exc:
        raise InvalidParamsError(f"Invalid parameters: {exc.errors()[0]['msg']}") from None


def push_body(record: BaseModel) -> bytes:
    """What a push notification for a config set over 1.0 carries: the task as the
    StreamResponse that wraps it (spec §4.3.3)."""
    return MessageToJson(pb.StreamResponse(task=task(record)), indent=None).encode()


def task_push_config(task_id: str, config: PushConfig) -> pb.TaskPushNotificationConfig:
    compat = v03.TaskPushNotificationConfig(
        task_id=task_id, push_notification_config=_v03(v03.PushNotificationConfig, config)
    )
    return conversions.to_core_task_push_notification_config(compat)
