"""One list-and-watch of the executor's Jobs or Pods: a local cache the trials read.

Per trial polling (a GET of the Job and a LIST of its pods every few seconds) costs the API
server two requests per trial per poll; an :class:`Informer` costs one LIST at start and one
long-lived watch, however many trials wait. It lists the objects under a label selector,
then watches from the list's ``resourceVersion`` with bookmarks (so a quiet stream still
moves its version forward), resumes each ended stream from the last version seen, and lists
again when the server answers 410 Gone (the version was compacted away). The blocking
stream runs in a thread of its own, never in the pool ``asyncio.to_thread`` shares with the
store's heartbeats.

While the list or the watch fails, :attr:`Informer.stale_since` says since when the cache
may be out of date; the trials wait rather than read a stale "pending" as a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from atoll.retry import backoff, pause_s
from orchestrator.executors.kubernetes_api import ApiError, KubernetesCluster, ResilientApi

log = logging.getLogger("atoll.orchestrator.kubernetes")
_BACKOFF = backoff(0.2, 10.0)  # between failed lists or watches; jittered


class Informer:
    def __init__(
        self,
        api: ResilientApi,
        cluster: KubernetesCluster,
        kind: str,
        namespace: str,
        selector: str,
        *,
        watch_timeout_s: float = 300.0,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.api = api
        self.cluster = cluster
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.watch_timeout_s = watch_timeout_s
        self.on_change = on_change
        self.items: dict[str, dict[str, Any]] = {}
        self.resource_version: str | None = None
        self.stale_since: float | None = time.time()  # nothing listed yet
        self.lists = 0  # LISTs made (the first, and one per 410 Gone)
        self.watches = 0  # watch streams opened
        self._synced = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._response: Any = None
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"informer-{self.kind}")

    async def synced(self, timeout_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._synced.wait(), timeout_s)
        return self._synced.is_set()

    async def stop(self) -> None:
        self._stopped = True
        response = self._response
        if response is not None:  # unblock the thread reading the stream
            with contextlib.suppress(Exception):
                response.shutdown() if hasattr(response, "shutdown") else response.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # --- the loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        while not self._stopped:
            if self.resource_version is None:
                try:
                    items, version = await self.api(
                        self.cluster.list, self.kind, self.namespace, self.selector
                    )
                except ApiError as exc:
                    failures += 1
                    self._stale()
                    log.warning("%s informer: list failed (retrying): %s", self.kind, exc)
                    await asyncio.sleep(self._backoff(failures))
                    continue
                self.lists += 1
                self.items = {self._key(item): item for item in items}
                self.resource_version = version
                self.stale_since = None
                self._synced.set()
                self.on_change()
            try:
                await self.api.limiter.acquire()
                self.watches += 1
                await self._stream()
                failures = 0  # the server ended the stream at its timeout: resume from the version
            except ApiError as exc:
                if exc.status == 410:
                    log.info("%s informer: %s; listing again", self.kind, exc)
                    self._stale()  # changes were missed: out of date until a list succeeds
                    self.resource_version = None
                    continue
                failures += 1
                self._stale()
                log.warning(
                    "%s informer: watch failed (resuming from %s): %s", self.kind, self.resource_version, exc
                )
                await asyncio.sleep(self._backoff(failures))

    @staticmethod
    def _backoff(failures: int) -> float:
        return pause_s(_BACKOFF, failures)

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        return (obj.get("metadata") or {}).get("name") or ""

    async def _stream(self) -> None:
        """Run one watch stream in its own thread; events are applied on the event loop."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def on_event(type_: str, obj: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._apply, type_, obj)

        def opened(response: Any) -> None:
            # Not yet caught up: an open stream can still answer 410 Gone, or replay the
            # changes missed. The first event or bookmark marks the cache fresh (_apply).
            self._response = response

        def finish(error: BaseException | None) -> None:
            if not done.done():
                done.set_exception(error) if error else done.set_result(None)

        def run() -> None:
            error: BaseException | None = None
            try:
                self.cluster.stream(
                    self.kind,
                    self.namespace,
                    self.selector,
                    self.resource_version or "",
                    self.watch_timeout_s,
                    on_event,
                    opened,
                )
            except BaseException as exc:  # noqa: BLE001 — handed to the event loop
                error = exc
            finally:
                self._response = None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(finish, error)

        threading.Thread(target=run, name=f"watch-{self.kind}", daemon=True).start()
        await done

    def _stale(self) -> None:
        if self.stale_since is None:
            self.stale_since = time.time()

    def _apply(self, type_: str, obj: dict[str, Any]) -> None:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = version
        if type_ == "BOOKMARK":
            self.stale_since = None
            return
        self.stale_since = None
        key = self._key(obj)
        if type_ == "DELETED":
            self.items.pop(key, None)
        elif type_ in ("ADDED", "MODIFIED"):
            self.items[key] = obj
        self.on_change()


__all__ = ["Informer"]
