"""Logs: one line per event, JSON for machines or text for a terminal, with the request id.

`logging_config(format, level)` is a `logging.config.dictConfig` dictionary that sends the
root logger and uvicorn's loggers (`uvicorn.error`, `uvicorn.access`) through one handler on
stdout, so every line, ours or uvicorn's, has the same shape. Give it to uvicorn as
`log_config`, or apply it with `configure_logging`.

Every line carries `request_id`: the id of the HTTP request being answered (set by the
observability middleware through `REQUEST_ID`), or null outside a request. Secrets are
scrubbed from every line before it is written (`redact`): bearer tokens, JWTs, API keys and
values of credential-named query parameters or headers.
"""

import logging
import logging.config
import re
import sys
from contextvars import ContextVar
from typing import Any, Literal, TextIO

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from agentic_rag.ids import new_id

type LogFormat = Literal["json", "text"]

REQUEST_ID: ContextVar[str | None] = ContextVar("agentic_rag_request_id", default=None)

REQUEST_ID_HEADER = "X-Request-ID"

# A sane incoming request id: short, printable, nothing that could forge a log line or a header.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")


def sane_request_id(value: str | None) -> str | None:
    """`value` if it is acceptable as a request id, else None."""
    if value is not None and _SANE_REQUEST_ID.fullmatch(value):
        return value
    return None


def new_request_id() -> str:
    return new_id()


def resolve_format(configured: LogFormat | None, stream: TextIO | None = None) -> LogFormat:
    """The configured format, or by default: text on a terminal, JSON otherwise."""
    if configured is not None:
        return configured
    stream = stream if stream is not None else sys.stdout
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return "json"


# -- secrets ----------------------------------------------------------------------------------

_REDACTED = "[REDACTED]"
_SECRET_NAMES = (
    r"authorization|proxy-authorization|x-api-key|api[_-]?key|apikey|access[_-]?token"
    r"|refresh[_-]?token|id[_-]?token|token|secret|client[_-]?secret|password|passwd"
)
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # name=value or name: value (headers, query strings, reprs), with an optional auth scheme
    (
        re.compile(
            rf"(?i)\b({_SECRET_NAMES})(['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic)\s+)?"
            r"(?!\[REDACTED\])[^\s'\"&,;)}\]]+"
        ),
        rf"\1\2\3{_REDACTED}",
    ),
    # a bare "Bearer <token>"
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {_REDACTED}"),
    # passwords in URLs (DSNs): scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"), rf"\1{_REDACTED}@"),
    # JWTs wherever they appear
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), _REDACTED),
    # this service's API keys (security/api_keys.py: "ar_<id>_<secret>"); the id stays
    (re.compile(r"\b(ar_[A-Za-z0-9]{4,}_)[A-Za-z0-9_-]{32,}"), rf"\1{_REDACTED}"),
)


def redact(text: str) -> str:
    """`text` with anything that looks like a credential replaced by [REDACTED]."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# -- filters and formatters -------------------------------------------------------------------


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (the current request's, or None) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class AccessFieldsFilter(logging.Filter):
    """Gives uvicorn's access lines structured fields: client, method, path, status."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, _http_version, status = args
            record.client = client
            record.http_method = method
            record.path = redact(str(path))
            record.status = status
        return True


class RedactFilter(logging.Filter):
    """Scrubs credentials from the message and from the traceback of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info:
            # Formatters print `exc_text` when set; without `exc_info` they cannot redo it.
            record.exc_text = record.exc_text or logging.Formatter().formatException(
                record.exc_info
            )
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class TextFormatter(logging.Formatter):
    """`time LEVEL [request-id] logger: message`, for people at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s [%(request_id)s] %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None) is None:
            record.request_id = "-"
        return super().format(record)


class _JsonFormatter(JsonFormatter):
    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {"time": log_data.pop("time", None), **log_data}  # time first, for people


def json_formatter() -> JsonFormatter:
    """`{"time", "level", "logger", "message", "request_id", ...extra fields}` per line."""
    return _JsonFormatter(
        ["levelname", "name", "message", "request_id"],
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
        rename_fields_keep_missing=True,
        # uvicorn's copy of the message with terminal colour codes
        reserved_attrs=[*RESERVED_ATTRS, "color_message"],
    )


def logging_config(format: LogFormat, level: str) -> dict[str, Any]:
    """A dictConfig for the root logger and uvicorn's, all through one handler on stdout."""
    level = level.upper()
    formatter: dict[str, Any] = (
        {"()": json_formatter} if format == "json" else {"()": TextFormatter}
    )
    inherit = {"handlers": [], "propagate": True, "level": level}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "access_fields": {"()": AccessFieldsFilter},
            "request_id": {"()": RequestIdFilter},
            "redact": {"()": RedactFilter},
        },
        "formatters": {"line": formatter},
        "handlers": {
            "stdout": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "formatter": "line",
                # Handler filters see records propagated from every logger, uvicorn's included.
                "filters": ["access_fields", "request_id", "redact"],
            }
        },
        "loggers": {
            "uvicorn": dict(inherit),
            "uvicorn.error": dict(inherit),
            "uvicorn.access": dict(inherit),
        },
        "root": {"handlers": ["stdout"], "level": level},
    }


def configure_logging(format: LogFormat | None, level: str) -> dict[str, Any]:
    """Apply the configuration now; return it (for uvicorn's `log_config`)."""
    config = logging_config(resolve_format(format), level)
    logging.config.dictConfig(config)
    return config
