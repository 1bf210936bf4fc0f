"""Warm-up of our app servers: their imports are most of an in-process server's cold start."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from environment.gateway_errors import describe_error

logger = logging.getLogger("environment.preload")

_preload_lock = threading.Lock()
_preloaded = False  # a preload has started in this process
_preload_finished = threading.Event()
_preloaded_servers: list[str] = []


def app_servers_preloaded() -> bool:
    """True once :func:`preload_app_servers` has finished in this process."""
    return _preload_finished.is_set()


def wait_for_preload(timeout_s: float | None = None) -> bool:
    """If a preload is running, wait (up to ``timeout_s``) until it has finished.

    ``POST /apps`` building our servers calls this first: a preload under way is already
    importing and building them, and a second thread doing the same at the same time only
    contends with it for the GIL and the import locks (one import path, not two). Returns
    False only when the wait timed out; True at once when no preload was started.
    """
    if not _preloaded:
        return True
    return _preload_finished.wait(timeout_s)


def preloaded_servers() -> tuple[str, ...]:
    """The servers :func:`preload_app_servers` built (so far) in this process."""
    return tuple(_preloaded_servers)


def preload_app_servers() -> None:
    """Import every app server, the optional ones included, and build each once over an empty
    world (blocking; run in a thread). Does nothing when a preload has already started.

    Most of an in-process server's cold start is importing its libraries (PyMuPDF, openpyxl,
    python-pptx...); doing it while the environment waits for its world makes ``POST /apps``
    fast. Failures are only logged: ``/apps`` reports them properly if that server is asked for,
    and a preload that fails still counts as finished (nothing waits on it for ever).
    """
    if _claim():
        _preload()


def start_preload(then: Callable[[], object] | None = None) -> threading.Thread | None:
    """:func:`preload_app_servers` in a daemon thread, then ``then`` (whatever the preload's
    outcome). The preload counts as started when this returns, so a :func:`wait_for_preload`
    from then on waits for it. None when a preload had already started."""
    if not _claim():
        return None

    def run() -> None:
        try:
            _preload()
        finally:
            if then is not None:
                then()

    thread = threading.Thread(target=run, name="atoll-preload", daemon=True)
    thread.start()
    return thread


def _claim() -> bool:
    """Mark the preload as started; False when it already was."""
    global _preloaded
    with _preload_lock:
        if _preloaded:
            return False
        _preloaded = True
        return True


def _preload() -> None:
    started = time.perf_counter()
    try:
        from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES, create_tools
        from mcp_servers._core import schema_cache

        with tempfile.TemporaryDirectory(prefix="atoll-preload-") as empty:
            # Optional servers too: a world that lists Edgar SEC or FMP would otherwise pay
            # market_data's cold start on its first POST /apps.
            for name in (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES):
                try:
                    create_tools(name, fs_root=Path(empty) / "fs", apps_data_root=Path(empty) / "apps")
                    _preloaded_servers.append(name)
                except Exception as exc:  # reported again, by name, when /apps asks for it
                    logger.info(
                        "preload of app server failed", extra={"server": name, "error": describe_error(exc)}
                    )
        # The next start reads the tools' schemas instead of computing them again.
        schema_cache.save()
    except Exception as exc:  # a speed-up only: /apps builds (and reports) what it needs
        logger.warning("preload of the app servers failed", extra={"error": describe_error(exc)})
    finally:
        _preload_finished.set()
    logger.info("app servers preloaded", extra={"duration_ms": round((time.perf_counter() - started) * 1000)})
