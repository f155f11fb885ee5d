"""Which run (and tool call) a log record comes from: context variables, a logging
filter that copies them onto records, and a stdlib JSON formatter.

The engine sets :data:`run_ids` as a run starts and :data:`call_id` around each tool
call; both are context variables, so a record logged from a tool's worker thread, a
hook or a subagent's run (which sets its own) carries the right ids. :class:`RunLogFilter`
puts ``run_id``, ``session_id``, ``agent_id`` and ``call_id`` on every record that
passes the handler it is attached to (None outside a run, or outside a tool call); a
value the caller passed in ``extra=`` is kept. :class:`JsonLogFormatter` writes one
JSON object a line.

Examples:
    >>> import logging
    >>> record = logging.LogRecord("x", logging.INFO, __file__, 1, "hi %s", ("there",), None)
    >>> token = run_ids.set(RunIds("run_1", "sess_1", "agent_1"))
    >>> RunLogFilter().filter(record), record.run_id, record.call_id
    (True, 'run_1', None)
    >>> run_ids.reset(token)
    >>> data = json.loads(JsonLogFormatter().format(record))
    >>> data["message"], data["run_id"]
    ('hi there', 'run_1')
"""

from __future__ import annotations

import contextvars
import json
import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["LOG_FIELDS", "JsonLogFormatter", "RunIds", "RunLogFilter", "call_id", "run_ids"]


@dataclass(frozen=True, slots=True)
class RunIds:
    """The ids of the run a record is logged in."""

    run_id: str
    session_id: str
    agent_id: str


run_ids: contextvars.ContextVar[RunIds | None] = contextvars.ContextVar(
    "deputy_shiny_run_ids", default=None
)
call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "deputy_shiny_call_id", default=None
)

LOG_FIELDS = ("run_id", "session_id", "agent_id", "call_id")
"""The record attributes :class:`RunLogFilter` sets."""


class RunLogFilter(logging.Filter):
    """Adds the current run's ``run_id``, ``session_id``, ``agent_id`` and ``call_id``
    to each record (attach it to a handler); never drops a record.

    Examples:
        >>> handler = logging.StreamHandler()
        >>> handler.addFilter(RunLogFilter())
    """

    def filter(self, record: logging.LogRecord) -> bool:
        ids = run_ids.get()
        values = (None, None, None) if ids is None else (ids.run_id, ids.session_id, ids.agent_id)
        fields = record.__dict__
        for name, value in zip(LOG_FIELDS, (*values, call_id.get()), strict=True):
            fields.setdefault(name, value)  # extra={"run_id": ...} from the caller wins
        return True


_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)


class JsonLogFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the run's ids and any other
    ``extra`` fields (values JSON cannot hold are written with ``str``), the traceback.

    Examples:
        >>> handler = logging.StreamHandler()
        >>> handler.setFormatter(JsonLogFormatter())
    """

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update((k, v) for k, v in record.__dict__.items() if k not in _STANDARD)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, default=str)
