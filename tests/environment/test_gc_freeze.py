"""A serving environment keeps its startup heap out of the garbage collector's full passes."""

from __future__ import annotations

import gc

from fastapi import FastAPI
from fastapi.testclient import TestClient

from environment.app import create_app


def _started(app: FastAPI) -> FastAPI:
    """``app`` once its MCP plane (built in the background by the lifespan) is up."""
    assert app.state.plane.wait_ready(30), app.state.plane.error
    return app


def test_freeze_heap_exempts_the_startup_heap_and_plain_apps_leave_gc_alone(settings):
    gc.unfreeze()
    try:
        with TestClient(app := create_app(settings)):
            _started(app)
            assert gc.get_freeze_count() == 0  # a library user's process is not touched
        with TestClient(app := create_app(settings, freeze_heap=True)):
            _started(app)
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
        with TestClient(app := create_app(settings, freeze_heap=True)):
            # deferred until the MCP plane is built (in the background), then resumed
            _started(app)
            assert gc.get_threshold() == threshold
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_serve_that_fails_before_starting_leaves_full_collections_on(tmp_path):
    # In-process (the CLI's function, as an embedding program may call it): a bad port stops
    # `atoll env serve` before any app froze the heap; the deferral must not outlive it.
    from typer.testing import CliRunner

    from atoll_cli.cli import app

    threshold = gc.get_threshold()
    arguments = ["env", "serve", "--port", "70000", "--fs-root", str(tmp_path / "f")]
    result = CliRunner().invoke(app, [*arguments, "--apps-data-root", str(tmp_path / "a")])
    assert result.exit_code != 0 and "70000" in str(result.exception)
    assert gc.get_threshold() == threshold


def test_the_startup_freeze_walks_only_the_young_generations():
    # A full collection of the start-up heap (~150,000 objects) cost ~0.1 s of the start's CPU
    # to find a few hundred objects of garbage; the freeze collects generations 0 and 1 only.
    from atoll.runtime import freeze_startup_heap

    gc.unfreeze()
    try:
        before = [generation["collections"] for generation in gc.get_stats()]
        freeze_startup_heap()
        after = [generation["collections"] for generation in gc.get_stats()]
        assert after[1] == before[1] + 1  # the young generations were collected...
        assert after[2] == before[2]  # ...and the old one was not walked
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
