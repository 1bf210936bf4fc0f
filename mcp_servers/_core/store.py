"""App-data files: a parsed-file cache keyed by file identity, and file locks.

:class:`FileCache` keeps the parsed form of a file (a mail index, a calendar, a chat
group) and re-parses only when the file's ``(mtime_ns, size, inode)`` changes, whether
we changed it or something else did (a populate). After our own write, a server either
calls :meth:`FileCache.put` with the updated parsed form (no re-parse) or
:meth:`FileCache.invalidate`.

:func:`file_lock` serialises writers of one file across threads and processes. Lock files
live in the system temp folder, never beside the data, so they never show up in world
snapshots.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from atoll.errors import ErrorCode
from mcp_servers._core.errors import ToolError

T = TypeVar("T")

LOCK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FileStamp:
    """What identifies one version of a file."""

    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, path: str | Path) -> FileStamp | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)

    @classmethod
    def from_stat(cls, st: os.stat_result) -> FileStamp:
        """The stamp of a ``stat``/``fstat`` result (of a descriptor opened beneath a root)."""
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


class FileCache(Generic[T]):
    """Parsed files, re-parsed only when the file changes.

    ``loader(path)`` parses one file; ``stamp(path)`` says which version is there now (the
    default stats the path; app-data stores pass one that stats through the root's
    descriptor, see :class:`AppData`). Thread-safe: concurrent ``get`` calls for the same
    file parse it once. At most ``max_entries`` files are kept (least recently used
    dropped). ``hits``/``misses`` count lookups (benchmarks and tests read them).
    """

    def __init__(
        self,
        loader: Callable[[Path], T],
        *,
        max_entries: int = 512,
        stamp: Callable[[str], FileStamp | None] = FileStamp.of,
    ) -> None:
        self._loader = loader
        self._stamp = stamp
        self._max_entries = max_entries
        self._entries: OrderedDict[str, tuple[FileStamp, T]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def get(self, path: str | Path, *, stamp: FileStamp | None = None) -> T:
        """The parsed form of the file as it is now (``stamp``: its version, when the caller
        has just stat-ed it, e.g. in a descriptor walk).

        Raises FileNotFoundError when the file is absent; loader errors propagate.
        """
        key = os.path.abspath(path)
        if stamp is None:
            stamp = self._stamp(key)
        if stamp is None:
            self.invalidate(key)
            raise FileNotFoundError(key)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == stamp:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:  # another thread may have parsed it meanwhile
                entry = self._entries.get(key)
                if entry is not None and entry[0] == stamp:
                    self.hits += 1
                    return entry[1]
                self.misses += 1
            value = self._loader(Path(key))
            after = self._stamp(key)
            # Only cache what we know matches the file; a write during parsing means retry next time.
            if after == stamp:
                self._store(key, stamp, value)
            return value

    def peek(self, path: str | Path) -> tuple[FileStamp, T] | None:
        """The cached (stamp, value) without checking the file, or None."""
        with self._lock:
            return self._entries.get(os.path.abspath(path))

    def put(self, path: str | Path, value: T) -> None:
        """Record ``value`` as the parsed form of the file as it is now (after our own write)."""
        key = os.path.abspath(path)
        stamp = self._stamp(key)
        if stamp is None:
            self.invalidate(key)
        else:
            self._store(key, stamp, value)

    def invalidate(self, path: str | Path | None = None) -> None:
        """Forget one file (or everything when ``path`` is None)."""
        with self._lock:
            if path is None:
                self._entries.clear()
            else:
                self._entries.pop(os.path.abspath(path), None)

    def _store(self, key: str, stamp: FileStamp, value: T) -> None:
        with self._lock:
            self._entries[key] = (stamp, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)


def _lock_path(path: str | Path) -> str:
    folder = os.path.join(tempfile.gettempdir(), "atoll-locks")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    digest = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return os.path.join(folder, digest + ".lock")


@contextmanager
def file_lock(
    path: str | Path, *, timeout: float = LOCK_TIMEOUT_S, caches: tuple[FileCache, ...] = ()
) -> Iterator[None]:
    """Hold the exclusive writer lock of ``path`` (threads and processes).

    ``caches`` are invalidated for ``path`` on exit, so a writer that does not ``put`` its
    new parsed form never leaves a stale one. Raises ToolError ``conflict`` when the lock
    is not obtained within ``timeout`` seconds.
    """
    from filelock import FileLock, Timeout  # on the first write (~30 ms): not at start-up

    lock = FileLock(_lock_path(path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise ToolError(
            ErrorCode.conflict, f"{Path(path).name} is being written by someone else; retry"
        ) from None
    try:
        yield
    finally:
        for cache in caches:
            cache.invalidate(path)
        lock.release()
