"""The run lifecycle routes of the orchestrator API: thin HTTP over
:mod:`orchestrator.lifecycle` (listing, status, trials, and the control verbs) and :mod:`orchestrator.run_deletion` (delete). Every route
needs the API's bearer token when one is set; store work runs off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Body, Depends, Query

from atoll.http import ERROR_RESPONSES, strict_json
from atoll.trial import Outcome, TrialState
from orchestrator import lifecycle
from orchestrator.lifecycle_models import (
    CancelRequest,
    RunChange,
    RunPage,
    RunPatch,
    RunState,
    RunStatus,
    TrialDetail,
    TrialPage,
)
from orchestrator.run_deletion import RunDeletion, delete_run
from orchestrator.store import TrialStore
from orchestrator.store_control import TrialFilter

_LIMIT = Query(100, ge=1, le=lifecycle.MAX_PAGE, description="most items on the page")
_OFFSET = Query(
    0,
    ge=0,
    le=lifecycle.MAX_POSITION,
    description="items skipped before the page (the previous reply's next_offset)",
)


def lifecycle_router(store: TrialStore, authorize: Callable[..., Awaitable[None]]) -> APIRouter:
    """The routes, each guarded by ``authorize``."""
    router = APIRouter(dependencies=[Depends(authorize)], responses=ERROR_RESPONSES)

    @router.get("/runs")
    async def list_runs(
        state: RunState | None = Query(None, description="only runs in this state"),
        prefix: str | None = Query(None, max_length=200, description="only runs whose name starts so"),
        include_archived: bool = Query(False, description="also archived runs"),
        limit: int = _LIMIT,
        offset: int = _OFFSET,
    ) -> RunPage:
        return await asyncio.to_thread(
            lifecycle.list_runs,
            store,
            state=state,
            prefix=prefix,
            include_archived=include_archived,
            limit=limit,
            offset=offset,
        )

    @router.get("/runs/{name}")
    async def run_status(name: str) -> RunStatus:
        return await asyncio.to_thread(lifecycle.run_status, store, name)

    @router.get("/runs/{name}/trials")
    async def run_trials(
        name: str,
        state: TrialState | None = Query(None, description="only trials in this state"),
        outcome: Outcome | None = Query(None, description="only finished trials with this outcome"),
        agent: str | None = Query(None, max_length=200, description="only this agent's trials"),
        task: str | None = Query(None, max_length=300, description="only this task's trials"),
        limit: int = _LIMIT,
        offset: int = _OFFSET,
    ) -> TrialPage:
        where = TrialFilter(
            state=state.value if state else None,
            outcome=outcome.value if outcome else None,
            agent=agent,
            task=task,
        )
        return await asyncio.to_thread(lifecycle.list_trials, store, name, where, limit=limit, offset=offset)

    @router.get("/runs/{name}/trials/{trial_id}")
    async def run_trial(name: str, trial_id: str) -> TrialDetail:
        return await asyncio.to_thread(lifecycle.trial_detail, store, name, trial_id)

    @router.post("/runs/{name}/cancel", dependencies=[Depends(strict_json(CancelRequest))])
    async def cancel(name: str, request: CancelRequest | None = Body(None)) -> RunChange:
        in_flight = (request or CancelRequest()).in_flight
        return await asyncio.to_thread(lifecycle.cancel_run, store, name, in_flight)

    @router.post("/runs/{name}/pause")
    async def pause(name: str) -> RunChange:
        return await asyncio.to_thread(lifecycle.pause_run, store, name)

    @router.post("/runs/{name}/resume")
    async def resume(name: str) -> RunChange:
        return await asyncio.to_thread(lifecycle.resume_run, store, name)

    @router.post("/runs/{name}/requeue")
    async def requeue(name: str) -> RunChange:
        return await asyncio.to_thread(lifecycle.requeue_run, store, name)

    @router.patch("/runs/{name}", dependencies=[Depends(strict_json(RunPatch))])
    async def patch(name: str, change: RunPatch) -> RunChange:
        return await asyncio.to_thread(lifecycle.set_concurrency, store, name, change.concurrency)

    @router.post("/runs/{name}/archive")
    async def archive(name: str) -> RunChange:
        return await asyncio.to_thread(lifecycle.archive_run, store, name)

    @router.delete("/runs/{name}")
    async def delete(
        name: str,
        gc: bool = Query(True, description="then remove the stored worlds no trial uses (grace: 24 h)"),
    ) -> RunDeletion:
        return await asyncio.to_thread(delete_run, store, name, gc=gc)

    return router


__all__ = ["lifecycle_router"]
