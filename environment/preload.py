"""Warm-up of our app servers: their imports are most of an in-process server's cold start."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path

from environment.gateway import describe_error

logger = logging.getLogger("environment.preload")

_preload_lock = threading.Lock()
_preloaded = False
_preload_finished = threading.Event()


def app_servers_preloaded() -> bool:
    """True once :func:`preload_app_servers` has finished in this process."""
    return _preload_finished.is_set()


def preload_app_servers() -> None:
    """Import every app server and build each once over an empty world (blocking; run in a thread).

    Most of an in-process server's cold start is importing its libraries (PyMuPDF, openpyxl,
    python-pptx...); doing it while the environment waits for its world makes ``POST /apps``
    fast. Failures are only logged: ``/apps`` reports them properly if that server is asked for.
    """
    global _preloaded
    with _preload_lock:
        if _preloaded:
            return
        _preloaded = True
        started = time.perf_counter()
        try:
            from mcp_servers import SERVER_NAMES, create_server
        except ImportError as exc:
            logger.warning("app servers not importable", extra={"error": describe_error(exc)})
            _preload_finished.set()
            return
        with tempfile.TemporaryDirectory(prefix="atoll-preload-") as empty:
            for name in SERVER_NAMES:
                try:
                    create_server(name, fs_root=Path(empty) / "fs", apps_data_root=Path(empty) / "apps")
                except Exception as exc:  # reported again, by name, when /apps asks for it
                    logger.info(
                        "preload of app server failed", extra={"server": name, "error": describe_error(exc)}
                    )
        _preload_finished.set()
        logger.info(
            "app servers preloaded", extra={"duration_ms": round((time.perf_counter() - started) * 1000)}
        )
