"""Parsed once per content: what a file's bytes parse into, shared by every world of a process.

A trial's world is a fresh copy of its task's seed, so the app servers of the next trial read
the very bytes the last one read: the same mailboxes, calendars and chat spaces under the same
names. Each app server keeps its own per-file cache (``mcp_servers._core.store.FileCache``,
keyed by path and version); this is the layer beneath it, keyed by what the file holds, so a
copy of a world already seen in this process is not parsed again.

A value kept here is shared by every holder, in every world: it must never be changed once
built (a write makes a new value), and what it fills in lazily must come out the same for
every holder.
"""

from __future__ import annotations

import hashlib
import mmap
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class ContentCache(Generic[T]):
    """Values built from bytes, by (sha-256 of the bytes, ``name``), least recently used first out.

    At most ``max_entries`` values are kept, and with ``weigh`` (the size of a value: its
    messages, its events) at most ``max_weight`` in all; a value heavier than a quarter of
    ``max_weight`` is built for its caller and not kept, and so is one that ``keep`` refuses
    (an extraction that failed, say). Thread-safe: threads that miss the same content at
    once share one build (the others wait for it), and a build runs outside the cache's lock,
    so a slow parse holds up no other content. A build that raises is not kept; the next
    caller builds again.
    """

    def __init__(
        self,
        *,
        max_entries: int,
        max_weight: int | None = None,
        weigh: Callable[[T], int] | None = None,
        keep: Callable[[T], bool] | None = None,
    ) -> None:
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self._max_entries = max_entries
        self._max_weight = max_weight
        self._weigh = weigh
        self._keep = keep
        self._values: OrderedDict[tuple[bytes, Hashable], tuple[T, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        self._flights: dict[tuple[bytes, Hashable], threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def get(self, data: bytes | mmap.mmap, name: Hashable, build: Callable[[], T]) -> T:
        """The value built from ``data`` under ``name`` (whatever besides the bytes decides
        what they parse into: the file's name in problems, a default zone); ``build()``
        makes it when this content has not been seen."""
        key = (hashlib.sha256(data).digest(), name)
        with self._lock:
            kept = self._lookup(key)
            if kept is not None:
                return kept[0]
            flight = self._flights.setdefault(key, threading.Lock())
        with flight:
            with self._lock:  # built by the thread this one waited for
                kept = self._lookup(key)
                if kept is not None:
                    return kept[0]
                self.misses += 1
            try:
                value = build()
                self._keep_value(key, value)
            finally:
                with self._lock:
                    self._flights.pop(key, None)
        return value

    def _lookup(self, key: tuple[bytes, Hashable]) -> tuple[T, int] | None:
        kept = self._values.get(key)
        if kept is not None:
            self._values.move_to_end(key)
            self.hits += 1
        return kept

    def _keep_value(self, key: tuple[bytes, Hashable], value: T) -> None:
        weight = self._weigh(value) if self._weigh is not None else 0
        if self._max_weight is not None and weight > self._max_weight // 4:
            return
        if self._keep is not None and not self._keep(value):
            return
        with self._lock:
            if key not in self._values:
                self._values[key] = (value, weight)
                self._weight += weight
            while len(self._values) > self._max_entries or (
                self._max_weight is not None and self._weight > self._max_weight
            ):
                self._weight -= self._values.popitem(last=False)[1][1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
