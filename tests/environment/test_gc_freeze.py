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


def test_full_collections_deferred_for_the_start_resume_when_the_app_freezes_its_heap(settings):
    # `atoll env serve` defers them before importing the environment; the served app's startup
    # freeze must bring them back, with the threshold as it was (a second deferral included).
    from atoll.runtime import defer_full_collections

    gc.unfreeze()
    threshold = gc.get_threshold()
    try:
        defer_full_collections()
        defer_full_collections()
        assert gc.get_threshold()[:2] == threshold[:2]  # young generations still collected
        assert gc.get_threshold()[2] > 1_000_000
        with TestClient(create_app(settings, freeze_heap=True)):
            assert gc.get_threshold() == threshold
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
