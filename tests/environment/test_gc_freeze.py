"""A serving environment keeps its startup heap out of the garbage collector's full passes."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

from environment.app import create_app


def test_freeze_heap_exempts_the_startup_heap_and_plain_apps_leave_gc_alone(settings):
    gc.unfreeze()
    try:
        with TestClient(create_app(settings)):
            assert gc.get_freeze_count() == 0  # a library user's process is not touched
        with TestClient(create_app(settings, freeze_heap=True)):
            # Everything alive after startup (FastAPI, FastMCP, pydantic models...) is frozen:
            # full collections no longer walk it, which is what kept p99 latency at ~140 ms.
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
