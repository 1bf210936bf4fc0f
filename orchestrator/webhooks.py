"""Webhooks: each run event POSTed, signed, to the operator's webhooks and the run's own.

Who chooses where: the operator. ``ATOLL_WEBHOOK_URLS`` are sent every run's events; a run
may register more (``POST /runs/{name}/webhooks``) only under a prefix of
``ATOLL_WEBHOOK_ALLOW`` (:func:`check_webhook_url`), since a submitter never chooses where the
service sends things (docs/security.md). Redirects are not followed: a webhook that answers
3xx has the event sent nowhere else.

Signature: ``X-Atoll-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`` keyed
by ``ATOLL_WEBHOOK_SECRET``; :func:`verify_signature` is the receiver's check.

Delivery: one task per webhook (a slow or dead receiver delays only its own events), woken
when its run has new events (one query per poll reads which runs have; an idle webhook costs no
query), reads the event log after the webhook's cursor, POSTs each event in order and retries with exponential
backoff (:mod:`atoll.retry`) on a connection error, a timeout, 408, 429 or 5xx, up to
``ATOLL_WEBHOOK_MAX_ATTEMPTS`` tries; another 4xx is not retried. A receiver's ``Retry-After``
replaces the backoff for the wait after that answer (cut to ``ATOLL_WEBHOOK_MAX_BACKOFF_S``). Every try is written to the
delivery log. The cursor moves past an event once it is delivered or given up, and is stored:
a restarted API resumes after the last event it finished with (at least once: an event being
sent when it stopped is sent again). An operator webhook first seen starts at the newest event;
a run's webhook starts at the run's first.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from atoll.errors import AtollError, CodedError, ErrorCode
from atoll.llm.endpoints import parse_endpoint, within
from atoll.retry import backoff, parse_retry_after, wait_retry_after
from orchestrator.events import EventModel, EventSettings
from orchestrator.store_events import RunEvent

if TYPE_CHECKING:
    from orchestrator.store import TrialStore

log = logging.getLogger("atoll.orchestrator.webhooks")

SIGNATURE_HEADER = "X-Atoll-Signature"
_RETRIED_STATUSES = frozenset({408, 429})
# How often the set of webhooks is read again (a run registering one is picked up this fast).
_TARGETS_EVERY_S = 2.0


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Atoll-Signature`` value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(
    secret: str, header: str | None, body: bytes, *, tolerance_s: float = 300.0, now: float | None = None
) -> bool:
    """A receiver's check: ``header`` signs ``body`` with ``secret`` and was made within
    ``tolerance_s`` of ``now`` (a replayed old delivery fails)."""
    fields = dict(part.split("=", 1) for part in (header or "").split(",") if "=" in part)
    timestamp, mac = fields.get("t", ""), fields.get("v1", "")
    if not timestamp.isdigit() or abs((now or time.time()) - int(timestamp)) > tolerance_s:
        return False
    expected = sign(secret, int(timestamp), body).rpartition("v1=")[2]
    return hmac.compare_digest(expected, mac)


def check_webhook_url(url: str, prefixes: list[str]) -> str:
    """``url`` when it is an http(s) URL under one of the operator's ``prefixes``; else
    AtollError ``webhook_not_allowed``."""
    if len(url) > 2000 or parse_endpoint(url) is None:
        raise AtollError(ErrorCode.webhook_not_allowed, f"webhook {url[:200]!r} is not an http(s) URL")
    if not within(url, prefixes):
        raise AtollError(
            ErrorCode.webhook_not_allowed,
            f"webhook {url!r} is not under the operator's ATOLL_WEBHOOK_ALLOW prefixes",
        )
    return url


@dataclass(frozen=True)
class Target:
    """Where events go: ``url``, with the events of ``run`` (None: of every run, the operator's)."""

    url: str
    run: str | None

    @property
    def key(self) -> str:
        return f"{self.run or '*'} {self.url}"


class _Retry(CodedError):
    """A try that may succeed later (connection error, timeout, 408, 429, 5xx), and the
    ``Retry-After`` its answer asked for."""

    code = ErrorCode.webhook_retry

    def __init__(self, message: str | None, retry_after_s: float | None = None) -> None:
        super().__init__(message or "retry")
        self.retry_after_s = retry_after_s


class WebhookDispatcher:
    """Delivers the event log to the webhooks (see the module doc); ``start`` and ``stop``
    from the API's startup and shutdown."""

    def __init__(self, store: TrialStore, settings: EventSettings) -> None:
        if settings.webhook_secret is None:
            raise AtollError(
                ErrorCode.operator_setting, "webhooks need ATOLL_WEBHOOK_SECRET, the key they are signed with"
            )
        for url in settings.operator_webhooks():
            if parse_endpoint(url) is None:
                raise AtollError(
                    ErrorCode.operator_setting, f"ATOLL_WEBHOOK_URLS: {url!r} is not an http(s) URL"
                )
        self.store = store
        self.settings = settings
        self.secret = settings.webhook_secret.get_secret_value()
        self._followers: dict[str, asyncio.Task] = {}
        self._wake: dict[str, tuple[Target, asyncio.Event]] = {}
        self._supervisor: asyncio.Task | None = None
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.settings.webhook_timeout_s, follow_redirects=False)
        self._supervisor = asyncio.create_task(self._supervise())

    async def stop(self) -> None:
        tasks = [task for task in (self._supervisor, *self._followers.values()) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    async def _supervise(self) -> None:
        """Start a follower per webhook, and wake the followers whose runs have new events:
        one query per poll whatever the number of webhooks (an idle follower reads nothing)."""
        seen = await asyncio.to_thread(self.store.last_event_id)
        targets_read = 0.0
        while True:
            try:
                if time.monotonic() - targets_read >= _TARGETS_EVERY_S:
                    self._start_followers(await asyncio.to_thread(self.store.webhooks))
                    targets_read = time.monotonic()
                changed = await asyncio.to_thread(self.store.runs_with_events_after, seen)
                if changed:
                    seen = max(changed.values())
                    for target, wake in self._wake.values():
                        if target.run is None or target.run in changed:
                            wake.set()
            except Exception as exc:  # the store is down: try again next round
                log.warning("webhooks: could not read the event log: %s", exc)
            await asyncio.sleep(self.settings.events_poll_s)

    def _start_followers(self, registered: list[tuple[str, str]]) -> None:
        targets = [Target(url, None) for url in self.settings.operator_webhooks()]
        targets += [Target(url, run) for run, url in registered]
        for target in targets:
            if target.key not in self._followers:
                self._wake[target.key] = (target, asyncio.Event())
                self._followers[target.key] = asyncio.create_task(self._follow(target))

    async def _follow(self, target: Target) -> None:
        wake = self._wake[target.key][1]
        cursor: int | None = None
        while True:
            wake.clear()  # before reading: an event committed after this read wakes us again
            try:
                if cursor is None:
                    cursor = await asyncio.to_thread(self.store.webhook_cursor, target.key)
                    if cursor is None:
                        start = 0 if target.run else await asyncio.to_thread(self.store.last_event_id)
                        await asyncio.to_thread(self.store.set_webhook_cursor, target.key, start)
                        cursor = start
                events = await asyncio.to_thread(self.store.events, target.run, after=cursor, limit=100)
                for event in events:
                    await self._deliver(target, event)
                    cursor = event.id
                    await asyncio.to_thread(self.store.set_webhook_cursor, target.key, cursor)
                if events:
                    continue
                await wake.wait()
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store is down: the cursor is where it was
                log.warning("webhooks: %s: %s", target.url, exc)
            await asyncio.sleep(self.settings.events_poll_s)

    async def _deliver(self, target: Target, event: RunEvent) -> None:
        settings = self.settings
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retry),
            stop=stop_after_attempt(settings.webhook_max_attempts),
            wait=wait_retry_after(
                backoff(settings.webhook_backoff_s, settings.webhook_max_backoff_s, jitter=False),
                settings.webhook_max_backoff_s,
            ),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await self._post(target, event, attempt.retry_state.attempt_number)
        except _Retry:
            log.warning("webhooks: gave up on event %d for %s", event.id, target.url)

    async def _post(self, target: Target, event: RunEvent, number: int) -> None:
        assert self._client is not None
        body = EventModel.of(event).model_dump_json().encode()
        headers = {
            "Content-Type": "application/json",
            "X-Atoll-Event": event.type,
            "X-Atoll-Event-Id": str(event.id),
            "X-Atoll-Delivery-Attempt": str(number),
            SIGNATURE_HEADER: sign(self.secret, int(time.time()), body),
        }
        status: int | None = None
        error: str | None = None
        asked_s: float | None = None
        try:
            reply = await self._client.post(target.url, content=body, headers=headers)
            status = reply.status_code
            asked_s = parse_retry_after(reply.headers)
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        await asyncio.to_thread(self.store.record_delivery, event, target.url, number, status, error)
        if status is None or status >= 500 or status in _RETRIED_STATUSES:
            raise _Retry(error, asked_s)


__all__ = ["SIGNATURE_HEADER", "Target", "WebhookDispatcher", "check_webhook_url", "sign", "verify_signature"]
