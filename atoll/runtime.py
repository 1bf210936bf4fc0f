"""Process-level tuning for long-running atoll services.

A service imports a large, long-lived heap (FastAPI, FastMCP, pydantic, the office libraries).
CPython's full ("generation 2") collection walks all of it: in the environment that was a
140 ms pause every few hundred tool calls, the whole of its p99 latency. Freezing the heap once
startup is done moves those objects out of the collector's reach; what requests allocate is
still collected as usual.

Building that heap is slowed by the same full collections: importing the environment and
building its app servers make some 150,000 long-lived objects, and the collector walked the
growing heap three times meanwhile (0.1-0.2 s of a 2 s start's CPU) only to find what the
freeze's one collection finds anyway. :func:`defer_full_collections` leaves them to the
freeze; the young generations are still collected as they fill, so a start's short-lived
cycles do not pile up.
"""

from __future__ import annotations

import gc
import threading

#: A generation-2 threshold no start reaches (it counts generation-1 collections).
_NEVER = 1_000_000_000

_lock = threading.Lock()
_deferred_threshold: int | None = None  # the generation-2 threshold before a deferral


def defer_full_collections() -> None:
    """No full (generation-2) collection until the next :func:`freeze_startup_heap`.

    For a service process's start (its imports, building what it serves), by code that freezes
    the heap once that is done; a second call before then does nothing.
    """
    global _deferred_threshold
    with _lock:
        if _deferred_threshold is None:
            young, middle, _deferred_threshold = gc.get_threshold()
            gc.set_threshold(young, middle, _NEVER)


def freeze_startup_heap() -> None:
    """Collect the young generations, then exempt every object alive now from later cyclic
    collections; full collections deferred by :func:`defer_full_collections` resume.

    Call it when startup (imports, caches built at start) is over; calling it again later
    freezes what has been added since. Objects frozen here are still freed by reference
    counting; only cycles among them would outlive their use, which long-lived startup
    objects do not form in meaningful numbers. The old generation is therefore not walked
    first: on the environment's start-up heap (≈ 150,000 objects) a full collection cost
    ≈ 0.1 s of CPU to find ≈ 260 objects of garbage, which the freeze now keeps (tens of KB,
    once per process) instead.
    """
    gc.collect(1)
    gc.freeze()
    resume_full_collections()


def resume_full_collections() -> None:
    """End a :func:`defer_full_collections` (no-op when none is on): the generation-2 threshold
    is as it was. :func:`freeze_startup_heap` calls it; so does a start that fails before it."""
    global _deferred_threshold
    with _lock:
        if _deferred_threshold is not None:
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, _deferred_threshold)
            _deferred_threshold = None
