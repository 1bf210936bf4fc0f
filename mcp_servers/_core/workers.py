"""Running a sync tool body in a worker thread, for less CPU than ``anyio.to_thread.run_sync``.

A sync tool body does file work, so it runs off the event loop (one slow read must not stall
other sessions). anyio's hop costs ≈ 110 µs of CPU per call on the development machine (a
checkpoint, its capacity limiter, a cancel scope, a Python ``queue.Queue`` with its condition
variable); :func:`run_sync` does the same hop in ≈ 30 µs: a C ``queue.SimpleQueue`` feeding a
bounded set of daemon threads, the result handed back with ``loop.call_soon_threadsafe``
(docs/performance.md, "Per-call cost"). What callers rely on is kept:

- **Cancellation waits for the body.** When the awaiting task is cancelled (an anyio cancel
  scope, a timeout, ``task.cancel()``), the cancellation propagates only once the body has
  returned, as with anyio's default ``abandon_on_cancel=False``: the gateway's in-flight count
  and a hot swap's drain count a call as finished only when its body is.
- **A body cancelled before it started never runs**, as with anyio (which gives up a call still
  waiting for a thread): a write queued behind a full pool and cancelled by its client does not
  happen after the client was told it was cancelled; the cancellation propagates at once.
- **Exit waits for running bodies** (up to :data:`EXIT_WAIT_S`): the threads are daemons, so an
  idle one never holds the process up, but a body still writing when the interpreter exits is
  waited for at ``atexit``, as anyio's non-daemon workers were, rather than cut off mid-write.
- **Bounded threads**: at most :data:`MAX_THREADS` (anyio's default limiter has 40 tokens);
  more calls than that queue in order.
- **Context**: the body runs in a copy of the caller's ``contextvars`` context.
- **Exceptions** reach the caller as raised (``StopIteration`` as ``RuntimeError``, which an
  asyncio future cannot carry, as anyio does).

It needs an asyncio event loop (the environment and every server here run on one).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

#: the most threads running tool bodies at once (anyio's default thread limiter: 40 tokens)
MAX_THREADS = 40
#: how long the interpreter's exit waits for bodies still running (seconds)
EXIT_WAIT_S = 30.0


_QUEUED, _STARTED, _DROPPED = range(3)


class _Job:
    """One body to run, and how its caller learns that it finished."""

    __slots__ = ("call", "context", "future", "loop", "result", "error", "finished", "waiter", "state")

    def __init__(self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.call = call
        self.context = contextvars.copy_context()
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        #: set only when the caller was cancelled while the body ran: what it then waits on
        self.waiter: asyncio.Future[None] | None = None
        #: _QUEUED, then _STARTED (a worker took it) or _DROPPED (its caller was cancelled
        #: first); changed only under the pool's lock
        self.state = _QUEUED

    def report(self) -> None:
        """On the loop's thread: hand the outcome to the caller."""
        self.finished = True
        future, error = self.future, self.error
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(self.result)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        self.result = self.error = None


class _Workers:
    """Daemon threads taking jobs from one queue; a thread is started when every one is busy."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        #: jobs queued or running
        self._outstanding = 0
        #: bodies running now, and the condition exit waits on for it to reach 0
        self._running = 0
        self._idle = threading.Condition(self._lock)

    def submit(self, job: _Job) -> None:
        with self._lock:
            self._outstanding += 1
            start = self._outstanding > self._threads and self._threads < self.limit
            if start:
                self._threads += 1
        if start:
            try:
                threading.Thread(target=self._work, name="atoll-tool-worker", daemon=True).start()
            except BaseException:
                with self._lock:
                    self._threads -= 1
                    self._outstanding -= 1
                raise
        self._jobs.put(job)

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            with self._lock:
                if job.state == _DROPPED:  # its caller was cancelled before it started
                    self._outstanding -= 1
                    del job
                    continue
                job.state = _STARTED
                self._running += 1
            try:
                job.result = job.context.run(job.call)
            except StopIteration as exc:
                error = RuntimeError("tool body raised StopIteration")
                error.__cause__ = exc
                job.error = error
            except BaseException as exc:  # the caller gets whatever the body raised
                job.error = exc
            with self._lock:
                self._outstanding -= 1
                self._running -= 1
                if self._running == 0:
                    self._idle.notify_all()
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                job.loop.call_soon_threadsafe(job.report)
            del job

    def drop(self, job: _Job) -> bool:
        """Drop ``job`` if no worker has started it (True: it will never run)."""
        with self._lock:
            if job.state != _QUEUED:
                return False
            job.state = _DROPPED
            return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no body is running (False: still running after ``timeout_s``)."""
        with self._lock:
            return self._idle.wait_for(lambda: self._running == 0, timeout_s)


_workers = _Workers(MAX_THREADS)


def _reset_after_fork() -> None:
    global _workers
    _workers = _Workers(MAX_THREADS)  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_reset_after_fork)
# atexit runs before daemon threads are stopped: a body still running gets to finish.
atexit.register(lambda: _workers.wait_idle(EXIT_WAIT_S))


async def run_sync(call: Callable[[], T]) -> T:
    """``call()`` in a worker thread; see the module for what is guaranteed."""
    job = _Job(call, asyncio.get_running_loop())
    _workers.submit(job)
    try:
        return await job.future
    except asyncio.CancelledError:
        if not job.finished and not _workers.drop(job):
            await _wait_finished(job)
        raise


async def _wait_finished(job: _Job) -> None:
    """After the caller was cancelled: wait (shielded from anyio's cancel scopes, and through
    further native cancellations) until the body has returned."""
    job.waiter = job.loop.create_future()
    with anyio.CancelScope(shield=True):
        while not job.finished:
            try:
                await asyncio.shield(job.waiter)
            except asyncio.CancelledError:
                continue
