"""The environment service's logs: atoll's one logging setup (atoll.logs), JSON lines on
stderr unless it is a terminal (``json_logs`` forces either)."""

from __future__ import annotations

from atoll.logs import JsonFormatter
from atoll.logs import configure_logging as _configure

__all__ = ["JsonFormatter", "configure_logging"]


def configure_logging(level: str = "INFO", *, json_logs: bool | None = None) -> None:
    """Send the service's logs (``environment.*``, uvicorn) to stderr; see atoll.logs."""
    _configure(level, json_logs=json_logs)
