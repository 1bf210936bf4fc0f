"""Logs of every atoll command and service on stderr: readable lines on a terminal, one JSON
object per line with ``--json-logs`` or when stderr is not a terminal (a container, a pipe, a
log collector).

    configure_logging("warning", json_logs=None)   # None: JSON unless stderr is a TTY

atoll's own loggers (``atoll``, ``orchestrator``, ``grader``, ``agents_runner``,
``environment``, ``mcp_servers``, ``uvicorn``) get the level given; every other library logs
warnings and worse through the same handler.
"""

from __future__ import annotations

import logging
import math
import sys
from datetime import UTC, datetime
from typing import IO

from atoll.jsonio import NonFiniteNumber, dumps_strict
from atoll.settings import variable as environment_variable

# Attributes every LogRecord has; anything else passed via ``extra=`` becomes a JSON field.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
HANDLER_NAME = "atoll-logs"
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
OWN_LOGGERS = (
    "atoll",
    "orchestrator",
    "grader",
    "agents_runner",
    "environment",
    "mcp_servers",
    *UVICORN_LOGGERS,
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            return dumps_strict(entry, default=str, ensure_ascii=False)
        except NonFiniteNumber:  # a log line still goes out: such a number as text ("nan")
            return dumps_strict(_finite_or_text(entry), default=str, ensure_ascii=False)


def _finite_or_text(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite_or_text(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_text(item) for item in value]
    return value


JSON_LOGS_HELP = (
    "log JSON lines on stderr (the default when stderr is not a terminal, or with ATOLL_JSON_LOGS=1)"
)
READABLE = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")


def wants_json(json_logs: bool | None, stream: IO[str] | None = None) -> bool:
    """``json_logs`` when given; else ``$ATOLL_JSON_LOGS`` (1/true) when set; else whether
    ``stream`` (stderr) is not a terminal."""
    if json_logs is not None:
        return json_logs
    variable = (environment_variable("ATOLL_JSON_LOGS") or "").strip().lower()
    if variable:
        return variable in ("1", "true", "yes", "on")
    stream = stream or sys.stderr
    return not (hasattr(stream, "isatty") and stream.isatty())


def configure_logging(
    level: str = "INFO",
    *,
    json_logs: bool | None = None,
    stream: IO[str] | None = None,
    loggers: tuple[str, ...] = OWN_LOGGERS,
) -> bool:
    """Install one stderr handler (readable or JSON, see :func:`wants_json`) and set
    ``loggers`` to ``level``; returns whether it writes JSON. Idempotent: calling it again
    replaces the handler it installed before."""
    stream = stream or sys.stderr
    as_json = wants_json(json_logs, stream)
    handler = logging.StreamHandler(stream)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if as_json else READABLE)
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if h.get_name() != HANDLER_NAME]
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    for name in loggers:
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if h.get_name() != HANDLER_NAME]
        logger.setLevel(level.upper())
        logger.propagate = True  # to the root's handler (uvicorn's own config would stop it)
    return as_json
