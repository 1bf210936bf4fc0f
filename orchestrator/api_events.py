"""The orchestrator API's event routes (included by :func:`orchestrator.api.create_app`).

| method path | does |
|---|---|
| ``GET /runs/{name}/events`` | Server-Sent Events of the run (``id:`` event id, ``event:`` type, ``data:`` strict JSON); resumes after ``Last-Event-ID`` or ``?after=``; ends after the run's latest event is run.finished, run.aborted or run.cancelled (a regrade's trial.regraded, a pause or a new cap after it do not reopen the run) unless ``?follow=true``; ``?format=json``: one page of events instead |
| ``POST /runs/{name}/webhooks`` | register a webhook for the run's events (only under ``ATOLL_WEBHOOK_ALLOW``); 201 |
| ``GET /runs/{name}/webhooks`` | the run's registered webhooks |
| ``GET /runs/{name}/webhooks/deliveries`` | the delivery log of the run's events (every try), paged by ``?after=`` |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from fastapi import Depends, FastAPI, Header, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.types import Receive, Scope, Send

from atoll.errors import AtollError, ErrorCode
from atoll.http import ERROR_RESPONSES, error_reply, http_error, strict_json
from orchestrator.events import EventModel, EventSettings, event_stream
from orchestrator.lifecycle import MAX_POSITION
from orchestrator.store_events import AFTERMATH_EVENTS, TERMINAL_EVENTS
from orchestrator.webhooks import WebhookDispatcher, check_webhook_url

_MEDIA_TYPE = "text/event-stream"


class EventPage(BaseModel):
    """``GET /runs/{name}/events?format=json``."""

    events: list[EventModel]
    last_id: int = Field(description="pass as ?after= for the next page (the request's own after when empty)")
    ended: bool = Field(description="the run's latest event is run.finished, run.aborted or run.cancelled")


class WebhookRequest(BaseModel):
    """``POST /runs/{name}/webhooks``."""

    url: str = Field(max_length=2000, description="under one of the operator's ATOLL_WEBHOOK_ALLOW prefixes")


class WebhookList(BaseModel):
    """``GET /runs/{name}/webhooks`` (the operator's own webhooks are not listed)."""

    run: str
    webhooks: list[str]


class DeliveryModel(BaseModel):
    id: int
    event_id: int
    target: Literal["run", "operator"] = Field(description="a webhook the run registered, or the operator's")
    url: str | None = Field(description="the run's webhook; null for the operator's (not shown)")
    attempt: int
    status_code: int | None = Field(description="the reply's status; null when none came")
    error: str | None
    at: float = Field(description="unix time of the try")


class DeliveryPage(BaseModel):
    """``GET /runs/{name}/webhooks/deliveries``."""

    deliveries: list[DeliveryModel]
    last_id: int = Field(description="pass as ?after= for the next page")


class _Stream(StreamingResponse):
    """A stream that gives its slot back however it ends (done, client gone, never started)."""

    def __init__(self, content: Any, release: Callable[[], None]) -> None:
        super().__init__(content, media_type=_MEDIA_TYPE, headers={"Cache-Control": "no-store"})
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _resume_point(after: int, last_event_id: str | None) -> int:
    if last_event_id is None or not last_event_id.strip():
        return after
    text = last_event_id.strip()
    if not (len(text) <= 19 and text.isascii() and text.isdigit() and int(text) <= MAX_POSITION):
        raise http_error(
            ErrorCode.bad_last_event_id, f"Last-Event-ID {last_event_id[:40]!r} is not an event id"
        )
    return max(after, int(text))


def install_events(
    app: FastAPI,
    settings: EventSettings,
    authorize: Callable[..., Awaitable[None]],
    known: Callable[[str], Any],
) -> None:
    """Add the event routes (over ``app.state.store``) and, with webhooks configured, their
    delivery task to ``app``; ``known(name)`` raises for a run that is not in the store."""
    store = app.state.store
    streams = {"open": 0}
    prefixes = settings.webhook_prefixes()
    if settings.webhook_deliver and (settings.operator_webhooks() or prefixes):
        dispatcher = WebhookDispatcher(store, settings)
        app.router.add_event_handler("startup", dispatcher.start)
        app.router.add_event_handler("shutdown", dispatcher.stop)

    def release() -> None:
        streams["open"] -= 1

    @app.get(
        "/runs/{name}/events",
        dependencies=[Depends(authorize)],
        response_model=None,
        responses={
            200: {
                "description": "an SSE stream, or with ?format=json a page of events",
                "content": {_MEDIA_TYPE: {"schema": {"type": "string"}}, "application/json": {}},
                "model": EventPage,
            },
            **ERROR_RESPONSES,
        },
    )
    async def run_events(
        name: str,
        after: int = Query(0, ge=0, le=MAX_POSITION, description="only events with a larger id"),
        follow: bool = Query(False, description="stay open after the run ends"),
        format: Literal["sse", "json"] = Query("sse", description="json: one page of events"),  # noqa: A002
        limit: int = Query(500, ge=1, le=1000, description="events per page (format=json)"),
        last_event_id: str | None = Header(None, description="resume after this event id (SSE reconnects)"),
    ) -> StreamingResponse | EventPage:
        await anyio.to_thread.run_sync(known, name)
        after = _resume_point(after, last_event_id)
        if format == "json":
            events = await anyio.to_thread.run_sync(lambda: store.events(name, after=after, limit=limit))
            latest = await anyio.to_thread.run_sync(lambda: store.latest_event(name, ignore=AFTERMATH_EVENTS))
            ended = latest is not None and latest.type in TERMINAL_EVENTS and len(events) < limit
            return EventPage(
                events=[EventModel.of(event) for event in events],
                last_id=events[-1].id if events else after,
                ended=ended,
            )
        if streams["open"] >= settings.events_max_streams:
            raise http_error(
                ErrorCode.too_many_streams,
                f"{settings.events_max_streams} event streams are open (ATOLL_EVENTS_MAX_STREAMS); "
                "try again later or use ?format=json",
                headers={"Retry-After": "5"},
            )
        streams["open"] += 1
        frames = event_stream(
            store,
            name,
            after=after,
            follow=follow,
            poll_s=settings.events_poll_s,
            heartbeat_s=settings.events_heartbeat_s,
            max_s=settings.events_max_stream_s,
        )
        return _Stream(frames, release)

    @app.post(
        "/runs/{name}/webhooks",
        status_code=201,
        dependencies=[Depends(authorize), Depends(strict_json(WebhookRequest))],
        responses=ERROR_RESPONSES,
    )
    async def add_webhook(name: str, webhook: WebhookRequest) -> WebhookList:
        await anyio.to_thread.run_sync(known, name)
        if not prefixes:
            raise http_error(
                ErrorCode.webhook_not_allowed,
                "this service takes no webhook from runs (the operator set no ATOLL_WEBHOOK_ALLOW)",
            )
        try:
            url = check_webhook_url(webhook.url, prefixes)
        except AtollError as exc:
            raise error_reply(exc) from None
        registered = [known_url for _, known_url in await anyio.to_thread.run_sync(store.webhooks, name)]
        if url not in registered and len(registered) >= settings.webhook_max_per_run:
            raise http_error(
                ErrorCode.too_many_webhooks,
                f"run {name!r} has {len(registered)} webhooks, the most a run may register "
                "(ATOLL_WEBHOOK_MAX_PER_RUN)",
            )
        await anyio.to_thread.run_sync(store.add_webhook, name, url)
        return await list_webhooks(name)

    @app.get("/runs/{name}/webhooks", dependencies=[Depends(authorize)], responses=ERROR_RESPONSES)
    async def list_webhooks(name: str) -> WebhookList:
        await anyio.to_thread.run_sync(known, name)
        registered = await anyio.to_thread.run_sync(store.webhooks, name)
        return WebhookList(run=name, webhooks=[url for _, url in registered])

    @app.get("/runs/{name}/webhooks/deliveries", dependencies=[Depends(authorize)], responses=ERROR_RESPONSES)
    async def webhook_deliveries(
        name: str,
        after: int = Query(0, ge=0, le=MAX_POSITION, description="only deliveries with a larger id"),
        limit: int = Query(100, ge=1, le=1000),
    ) -> DeliveryPage:
        await anyio.to_thread.run_sync(known, name)
        own = {url for _, url in await anyio.to_thread.run_sync(store.webhooks, name)}
        found = await anyio.to_thread.run_sync(lambda: store.deliveries(name, after=after, limit=limit))
        return DeliveryPage(
            deliveries=[
                DeliveryModel(
                    id=item.id,
                    event_id=item.event_id,
                    target="run" if item.url in own else "operator",
                    url=item.url if item.url in own else None,
                    attempt=item.attempt,
                    status_code=item.status_code,
                    error=item.error,
                    at=item.at,
                )
                for item in found
            ],
            last_id=found[-1].id if found else after,
        )
