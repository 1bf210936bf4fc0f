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

A command that loads most of what it runs while it works (``atoll run`` with the local
executor: the environments, their app servers, the agents runner with litellm and the grader
are loaded by its first trials, ≈ 640,000 objects) asks for the same with
:func:`freeze_once_loaded`; its executor says when that is over with :func:`loaded`. A process
that asked for nothing (a library user's) is left alone.

:func:`cyclic_gc_paused` turns the collector off around one large build of acyclic data (a
chat export's index), however many threads build at once.

This module is the one place that tunes the collector; nothing else calls ``gc.freeze``,
``gc.set_threshold`` or ``gc.disable``.

It also holds the process's **world lane** (:func:`world_work`): where several environments
share one process (the local executor's), their heavy synchronous world work (laying a world
from local files; listing and hashing it for the freshness check, a trial's delta or a seed)
takes turns instead of running on several threads at once. Only one thread runs Python at a
time anyway, and these loops make a system call per file: each call hands the interpreter lock
to another waiting thread and waits to get it back, two wake-ups and two context switches per
call. Four trials at a time on two CPUs cost half as much CPU again per trial as one at a time,
and the lane took back about half of that (docs/performance.md, "One world at a time"). A
process with one environment (a service) never turns the lane on, and pays nothing.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: A generation-2 threshold no start reaches (it counts generation-1 collections).
_NEVER = 1_000_000_000

_lock = threading.Lock()
_deferred_threshold: int | None = None  # the generation-2 threshold before a deferral
_gc_pauses = 0  # builds inside cyclic_gc_paused now
_gc_was_enabled = False  # the collector's state when the first of them began
_freeze_when_loaded = False  # freeze_once_loaded() was called and loaded() has not come yet
_world_lane = threading.RLock()  # re-entrant: a delta lists the world inside its own turn
_world_lane_users = 0  # share_world_lane() calls not yet ended by end_world_lane()


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
    is as it was, and a :func:`freeze_once_loaded` not yet fulfilled is dropped.
    :func:`freeze_startup_heap` calls it; so does a start that fails before it."""
    global _deferred_threshold, _freeze_when_loaded
    with _lock:
        _freeze_when_loaded = False
        if _deferred_threshold is not None:
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, _deferred_threshold)
            _deferred_threshold = None


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (and on again after, if it was).

    For building a large structure with no cycles: decoding and indexing a large chat export
    allocate some hundred thousand containers, none of them in a cycle; the collector would
    scan them (and, as the heap grows, the whole process's heap) several times over for
    nothing: about a fifth of the build.

    The collector's switch is process-wide and builds run on several threads at once (the
    background warm-up beside tool calls, several worlds in one process), so the pauses are
    counted: the first one in remembers whether the collector was on, the last one out
    restores that. Checking and switching separately per build could leave it off for good.
    """
    global _gc_pauses, _gc_was_enabled
    with _lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def freeze_once_loaded() -> None:
    """Defer full collections now and freeze the heap at the next :func:`loaded` (for a
    command whose work loads what it runs; see the module). End it with
    :func:`resume_full_collections` if the work ends before ``loaded()``."""
    global _freeze_when_loaded
    defer_full_collections()
    with _lock:
        _freeze_when_loaded = True


def loaded() -> None:
    """What the process runs its work with is loaded (the local executor calls it when a trial
    ends). After :func:`freeze_once_loaded`, the first call collects once in full (the cycles
    the work left so far are freed, not frozen) and freezes the heap, which ends the deferral;
    otherwise, and on later calls, it does nothing."""
    global _freeze_when_loaded
    with _lock:
        asked, _freeze_when_loaded = _freeze_when_loaded, False
    if asked:
        gc.collect()
        freeze_startup_heap()


def share_world_lane() -> None:
    """Several environments run in this process from now on (until the matching
    :func:`end_world_lane`): their world work takes turns (:func:`world_work`)."""
    global _world_lane_users
    with _lock:
        _world_lane_users += 1


def end_world_lane() -> None:
    """End one :func:`share_world_lane`; the lane is off when none is left."""
    global _world_lane_users
    with _lock:
        _world_lane_users = max(0, _world_lane_users - 1)


def world_lane_shared() -> bool:
    """Whether world work takes turns in this process now."""
    return _world_lane_users > 0


@contextlib.contextmanager
def world_work() -> Iterator[None]:
    """One heavy synchronous world operation: while environments share this process (see the
    module), one at a time; otherwise no wait at all.

    For CPU- and system-call-bound work on local files only, which never waits on another
    thread of this process or on the network: a section that waited for a thread that wants
    the lane would wait for ever, and a slow peer would hold up every other world."""
    if not _world_lane_users:
        yield
        return
    with _world_lane:
        yield
