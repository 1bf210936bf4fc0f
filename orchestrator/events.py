"""Run events as clients see them: the event model, its Server-Sent Events framing, the
stream of one run's events read from the store's event log, and the settings of events and
webhooks (docs/orchestrator.md "Events").

The log itself is written by the store, in the transaction of each change
(orchestrator.store_events); the API process, which is not the one running trials, only
reads it. Changes made outside the store's own writes append theirs with
:func:`record_event`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, SecretStr, field_validator

from atoll.http_guard import parse_list
from atoll.settings import AtollSettings, require_non_empty
from orchestrator.store_events import AFTERMATH_EVENTS, TERMINAL_EVENTS, RunEvent

if TYPE_CHECKING:
    from orchestrator.store import TrialStore

#: Every event type the store writes, with what its payload holds.
EVENT_TYPES: dict[str, str] = {
    "run.enqueued": "trials: how many trials were newly enqueued",
    "run.requeued": "trials: how many unfinished or errored trials went back to pending",
    "run.trials_archived": "archive, trials: trials moved out of the run (a replacement, ?replace=true)",
    "trial.leased": "trial_id, agent, task, run_index, attempt, worker",
    "trial.retrying": "trial_id, agent, task, run_index, attempt, error: an infrastructure failure, retried",
    "trial.released": "trial_id, agent, task, run_index, attempt: an interrupted worker gave the trial back",
    "trial.finished": "trial_id, agent, task, run_index, attempt, outcome, score (null when undefined)",
    "trial.regraded": "trial_id, outcome, score",
    "run.finished": "outcomes: trials per outcome; no trial of the run is pending or leased",
    "run.aborted": "reason, detail: why the run stopped before its trials were done",
    "run.cancelled": "reason, detail, cancelled, stopped: the run was cancelled (trials cancelled before "
    "they ran, running ones stopped; the others may still finish)",
    "run.paused": "trials (0): no trial of the run is leased until it is resumed",
    "run.resumed": "trials: the run is leasable again (trials: cancelled trials pending again)",
    "run.resized": "concurrency: the run's cap on trials in flight across every worker (null: none)",
}


class EventSettings(AtollSettings):
    """``ATOLL_EVENTS_*`` and ``ATOLL_WEBHOOK_*`` (part of the API's settings)."""

    events_poll_s: float = Field(0.5, gt=0, le=60, description="how often a stream reads the event log")
    events_heartbeat_s: float = Field(
        15.0, gt=0, description="a comment line on a quiet stream this often, so proxies keep it open"
    )
    events_max_streams: int = Field(64, ge=1, description="event streams open at once; beyond: 429")
    events_max_stream_s: float = Field(
        3600.0, gt=0, description="a stream ends after this long; the client resumes with Last-Event-ID"
    )
    webhook_urls: str = Field(
        "", description="comma-separated webhook URLs of the operator, sent every run's events"
    )
    webhook_allow: str = Field(
        "",
        description="comma-separated URL prefixes a run's webhook may be registered under "
        "(none: runs register no webhook)",
    )
    webhook_max_per_run: int = Field(8, ge=1, le=100, description="webhooks one run may register")
    webhook_secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key of X-Atoll-Signature (needed with webhooks)"
    )
    webhook_max_attempts: int = Field(6, ge=1, le=20, description="tries per event and webhook")
    webhook_backoff_s: float = Field(1.0, gt=0, description="pause after the first failed try; doubles")
    webhook_max_backoff_s: float = Field(60.0, gt=0, description="longest pause between tries")
    webhook_timeout_s: float = Field(10.0, gt=0, description="time one POST may take")
    webhook_deliver: bool = Field(
        True, description="deliver from this process (false on all API replicas but one)"
    )

    @field_validator("webhook_secret")
    @classmethod
    def _secret_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_WEBHOOK_SECRET")

    def operator_webhooks(self) -> list[str]:
        return parse_list(self.webhook_urls)

    def webhook_prefixes(self) -> list[str]:
        return parse_list(self.webhook_allow)


class EventModel(BaseModel):
    """One run event: the ``data:`` of an SSE frame, an item of ``?format=json``, a webhook body."""

    id: int = Field(description="grows with every event of the store; resume after it")
    run: str
    type: str = Field(description="run.enqueued, trial.leased, trial.finished, run.finished, …")
    at: datetime = Field(description="when the change was committed (UTC)")
    payload: dict[str, Any]

    @classmethod
    def of(cls, event: RunEvent) -> EventModel:
        return cls(
            id=event.id,
            run=event.run,
            type=event.type,
            at=datetime.fromtimestamp(event.at, UTC),
            payload=event.payload,
        )


def record_event(store: TrialStore, run: str, kind: str, **payload: Any) -> None:
    """Append one event to ``run``'s log (for a change the store's own writes do not log:
    ``record_event(store, name, "run.cancelled", reason=…)``). Prefer appending inside the
    change's own transaction (``TrialStore._append_events``) where there is one."""
    store.record_event(run, kind, payload)


def sse_frame(event: RunEvent) -> bytes:
    """``id:``, ``event:`` and one strict-JSON ``data:`` line, then the blank line."""
    data = EventModel.of(event).model_dump_json()
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n".encode()


async def event_stream(
    store: TrialStore,
    run: str,
    *,
    after: int = 0,
    follow: bool = False,
    poll_s: float = 0.5,
    heartbeat_s: float = 15.0,
    max_s: float | None = None,
    page: int = 500,
) -> AsyncIterator[bytes]:
    """SSE frames of ``run``'s events with an id above ``after``, as they are committed.
    Without ``follow`` it ends once every event is sent and the run's latest event is
    terminal (run.finished, run.aborted, run.cancelled; events that change no trial's state,
    such as a regrade's trial.regraded, do not reopen it), or the run has no event at all and
    no trial pending or leased (recorded before the event log); a comment line goes out after
    ``heartbeat_s`` without an event. Whatever else, it ends after ``max_s`` (the client
    resumes where it was)."""
    deadline = None if max_s is None else time.monotonic() + max_s
    yield f"retry: {int(max(poll_s, 1.0) * 1000)}\n\n".encode()
    latest = await asyncio.to_thread(store.events, run, after=after, limit=page)
    written = time.monotonic()
    last_type = None
    if not latest and after:  # resumed at the end: what was the last event?
        before = await asyncio.to_thread(store.latest_event, run, ignore=AFTERMATH_EVENTS)
        last_type = before.type if before is not None else None
    while True:
        for event in latest:
            yield sse_frame(event)
            after = event.id
            if event.type not in AFTERMATH_EVENTS:
                last_type = event.type
        if latest:
            written = time.monotonic()
            if len(latest) == page:  # more waiting: no pause
                latest = await asyncio.to_thread(store.events, run, after=after, limit=page)
                continue
        if not follow and last_type in TERMINAL_EVENTS:
            return
        if not follow and last_type is None and not await asyncio.to_thread(_outstanding, store, run):
            return  # no event at all (a run recorded before the log) and nothing left to run
        if deadline is not None and time.monotonic() >= deadline:
            return
        await asyncio.sleep(poll_s)
        if time.monotonic() - written >= heartbeat_s:
            yield b": keep-alive\n\n"
            written = time.monotonic()
        latest = await asyncio.to_thread(store.events, run, after=after, limit=page)


def _outstanding(store: TrialStore, run: str) -> bool:
    left = store.outstanding(run).get(run)
    return left is not None and bool(left.pending or left.leased)


__all__ = [
    "EVENT_TYPES",
    "EventModel",
    "EventSettings",
    "event_stream",
    "record_event",
    "sse_frame",
]
