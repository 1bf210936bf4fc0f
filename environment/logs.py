"""Structured JSON logs: one place configures them for the whole service."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

# Attributes every LogRecord has; anything else passed via ``extra=`` becomes a JSON field.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


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
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str = "INFO", *, json_logs: bool = True) -> None:
    """Send the service's logs (``environment.*``, uvicorn) to stderr, as JSON lines when asked.

    Idempotent: calling it again replaces the handler it installed before.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name("atoll-environment")
    handler.setFormatter(
        JsonFormatter() if json_logs else logging.Formatter("%(levelname)s %(name)s %(message)s")
    )
    for name in ("environment", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if h.get_name() != "atoll-environment"]
        logger.addHandler(handler)
        logger.setLevel(level.upper())
        logger.propagate = False
