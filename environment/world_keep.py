"""A replace populate keeps the world's files that already hold what it would lay.

Laying a trial's world from its seed writes every file again, and the previous world's files
are deleted. Each of those is an inode created and one freed, and on a filesystem where that
is dear (ext4 without a journal scans the inodes freed in the last minutes on every create;
docs/performance.md "Paper scale") it is most of a trial's kernel time, although the agent
changed one or two files. So a ``replace`` from one local folder (the local executor's seeds)
keeps each world file that is already what a fresh copy would be:

- the same bytes: the source's sha256 from a process-wide cache keyed by the source file's
  stat, the world file's from the world's stat cache, both trusted only while ``ctime`` is
  unchanged (an agent cannot set ``ctime`` back: :mod:`environment.stat_cache`);
- a regular file reached through real directories (no symlink on the way), with one link and
  no extended attributes;

and then gives it the owner, mode and mtime a fresh copy gets (the code server hands world
files to the sandbox user; an agent may ``chmod`` or ``touch`` one). Directories on the way
are kept the same way, their owner and mode reset. Everything else is laid fresh and
everything the source does not hold is removed, so the world afterwards has the members,
bytes, modes, owners and mtimes a fresh lay gives; the local executor still checks the
populated world's manifest digest against the seed's.

Nothing is kept while a ``code_exec`` call runs over the world: a process of the previous
trial could still write through a descriptor it holds. (Each call's processes die with its
sandbox, so once no call is in flight none is left.) Files kept count in the populate's
``objects_added`` and ``extracted_bytes`` as laid ones would, and ``ATOLL_KEEP_UNCHANGED_FILES=false``
turns this off.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atoll.errors import AtollError
from atoll.members import RESERVED_PREFIX
from environment.archive import LocalFile
from environment.populate import DIR_FLAGS, open_subdir, opened_dir
from environment.stat_cache import StatCache, StatKey, coarse_now_ns, hash_member, stat_key
from environment.world_parking import TOPS, ParkedWorld, Parking
from environment.world_walk import Budget, Member, SnapshotLimits
from mcp_servers._core import beneath

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20
_KEPT_FILE = "file"


@functools.cache
def _umask() -> int:
    """The process's umask, read without setting it (``os.umask`` would race other threads)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def fresh_file_mode(executable: bool) -> int:
    """The permission bits :class:`~environment.archive.SafeExtractor` gives a file it lays."""
    return 0o755 if executable else 0o644 & ~_umask()


def fresh_directory_mode() -> int:
    return 0o755 & ~_umask()


class _SourceHashes:
    """sha256 of local source files (seeds), by their stat key; shared by the process's
    environments (a seed is read by all of them). Thread-safe."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], tuple[StatKey, str]] = {}
        self._lock = threading.Lock()

    def sha256(self, descriptor: int) -> str | None:
        """The file's sha256, or None when it changed while it was read."""
        before = os.fstat(descriptor)
        key = stat_key(before)
        with self._lock:
            cached = self._entries.get((before.st_dev, before.st_ino))
        if cached is not None and cached[0] == key:
            return cached[1]
        digest = hashlib.sha256()
        offset = 0
        while chunk := os.pread(descriptor, _CHUNK, offset):
            digest.update(chunk)
            offset += len(chunk)
        after = os.fstat(descriptor)
        if stat_key(after) != key or offset != before.st_size:
            return None
        sha256 = digest.hexdigest()
        if after.st_ctime_ns < coarse_now_ns():  # racily clean otherwise (environment.stat_cache)
            with self._lock:
                if len(self._entries) >= self.LIMIT:
                    self._entries.clear()
                self._entries[(before.st_dev, before.st_ino)] = (key, sha256)
        return sha256


SOURCE_HASHES = _SourceHashes()


@dataclass(frozen=True)
class KeepRequest:
    """What a populate needs to keep unchanged files: the world's stat cache (under the world
    lock), the snapshot limits its hashing reads within, and where worlds are parked
    (:mod:`environment.world_parking`) with the source the world was last laid from."""

    cache: StatCache
    limits: SnapshotLimits
    parking: Parking | None = None
    laid_from: str | None = None


def code_calls_in_flight(fs_root: Path) -> int:
    """``code_exec`` calls running now over the world at ``fs_root``, in this process."""
    from mcp_servers.code.runs import calls_in_flight  # lazily: the code server's imports

    return calls_in_flight(fs_root)


@dataclass
class WorldKeeper:
    """One populate's keeping: decides per member (from the extractor), then clears each world
    root of everything not kept (in place of emptying it). ``top_of`` names the world root
    (``filesystem`` or ``.apps_data``) of a staging root. Close it after the populate."""

    request: KeepRequest
    world_root_of: Callable[[str], Path]
    top_of: Callable[[Path], str | None]
    source: str
    base: ParkedWorld | None = None  # a parked world of the same source, checked instead of the world
    kept_files: int = 0
    _trees: dict[str, dict[str, Any]] = field(default_factory=dict)
    _dirs: dict[tuple[str, str], int | None] = field(default_factory=dict)
    _budget: Budget | None = None

    @property
    def parks_world(self) -> bool:
        """Whether the world in place goes to the parking (laid from another source, and no
        parked world of this source takes its place): then nothing of it is kept."""
        laid_from = self.request.laid_from
        return self.request.parking is not None and self.base is None and laid_from not in (None, self.source)

    def root_of(self, top: str) -> Path:
        return self.base.root(top) if self.base is not None else self.world_root_of(top)

    @property
    def cache(self) -> StatCache:
        return self.base.cache if self.base is not None else self.request.cache

    # -- deciding ---------------------------------------------------------------------------

    def keep_directory(self, staging_root: Path, relative: str) -> bool:
        """Whether the world already has this directory, reached through real directories:
        then it is kept (nothing is made in staging)."""
        top = self.top_of(staging_root)
        if top is None or self.parks_world or self._directory(top, relative) is None:
            return False
        self._mark(top, relative, {})
        return True

    def keep_file(
        self,
        staging_root: Path,
        relative: str,
        source: LocalFile,
        size: int,
        executable: bool,
        mtime: float | None,
    ) -> bool:
        """Whether the world's file at this member already is what laying ``source`` would
        make; if so it is given a fresh copy's owner, mode and mtime and kept."""
        top = self.top_of(staging_root)
        if top is None or self.parks_world or os.path.lexists(staging_root / relative):  # a later member wins
            return False
        parent_name, _, name = relative.rpartition("/")
        parent = self._directory(top, parent_name)
        if parent is None:
            return False
        try:
            descriptor = os.open(name, _FILE_FLAGS, dir_fd=parent)
        except OSError:
            return False
        try:
            info = self._same(top, relative, descriptor, source, size, executable)
            if info is None:
                return False
            self._reset(descriptor, info, executable, mtime)
        except (OSError, AtollError):  # vanished, not ours to change, over a snapshot limit
            return False
        finally:
            os.close(descriptor)
        self._mark(top, relative, _KEPT_FILE)
        self.kept_files += 1
        return True

    def _same(
        self, top: str, relative: str, descriptor: int, source: LocalFile, size: int, executable: bool
    ) -> os.stat_result | None:
        """The file's ``fstat`` when it holds what ``source`` would lay, else None."""
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size != size:
            return None
        if os.listxattr(descriptor):
            return None
        wanted = SOURCE_HASHES.sha256(source.descriptor)
        if wanted is None:
            return None
        member = f"{top}/{relative}"
        cached = self.cache.lookup(member, info)
        if cached is not None:
            return info if cached.sha256 == wanted else None
        if self._budget is None:
            self._budget = Budget(self.request.limits)
        root = self._directory(top, "")
        assert root is not None
        hash_member(root, Member(member, relative, False, executable), self._budget, self.cache)
        # hash_member opens the path again: only its hash of this very inode, unchanged since
        # (the cache keeps it under the same stat key, and only when not racily clean), counts.
        cached = self.cache.lookup(member, info)
        return info if cached is not None and cached.sha256 == wanted else None

    @staticmethod
    def _reset(descriptor: int, info: os.stat_result, executable: bool, mtime: float | None) -> None:
        """A fresh copy's owner, mode and mtime; ``info`` is the file's ``fstat`` from the check."""
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(descriptor, os.geteuid(), os.getegid())
        mode = fresh_file_mode(executable)
        if stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(descriptor, mode)
        if mtime is not None and info.st_mtime != mtime:
            os.utime(descriptor, (mtime, mtime))

    def _directory(self, top: str, relative: str) -> int | None:
        """A descriptor of the world's directory (its root for ""), every step a real directory
        that can be given a fresh one's owner and mode and has no extended attributes (a
        default ACL), or None. Kept open until :meth:`close`."""
        key = (top, relative)
        if key not in self._dirs:
            if not relative:
                self._dirs[key] = os.open(self.root_of(top), DIR_FLAGS)
            else:
                parent_name, _, name = relative.rpartition("/")
                parent = self._directory(top, parent_name)
                self._dirs[key] = None if parent is None else _keepable_directory(parent, name)
        return self._dirs[key]

    def _mark(self, top: str, relative: str, leaf: Any) -> None:
        node = self._trees.setdefault(top, {})
        *parents, name = relative.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node.setdefault(name, leaf)

    # -- clearing ---------------------------------------------------------------------------

    def settle(self) -> None:
        """Before clearing: park the world being replaced (when it came from another source, or
        a parked world of this source is to take its place), and move that parked world into
        the roots, so that what was checked is what is cleared around."""
        parking, laid_from = self.request.parking, self.request.laid_from
        if parking is None:
            return
        if self.base is None:
            if self.parks_world:
                assert laid_from is not None
                parking.park(self.world_root_of, laid_from, self.request.cache)  # else deleted
            return
        if laid_from is None or not parking.park(self.world_root_of, laid_from, self.request.cache):
            for top in TOPS:  # the roots must be empty before the parked world moves in
                with opened_dir(self.world_root_of(top)) as root_fd:
                    for name in os.listdir(root_fd):
                        if not name.startswith(RESERVED_PREFIX):
                            beneath.remove_tree(root_fd, name)
        parking.unpark(self.base, self.world_root_of, self.request.cache)
        self.base = None

    def clear(self, top: str, root_fd: int, skip: Callable[[str], bool]) -> None:
        """Remove from the world root everything not kept (names ``skip`` accepts aside)."""
        tree = self._trees.get(top, {})
        for name in os.listdir(root_fd):
            if not skip(name):
                _clear_entry(root_fd, name, tree.get(name))

    def close(self) -> None:
        for descriptor in self._dirs.values():
            if descriptor is not None:
                os.close(descriptor)
        self._dirs.clear()
        if self.base is not None and self.request.parking is not None:  # the populate failed
            self.request.parking.give_back(self.base)
            self.base = None


def _keepable_directory(parent: int, name: str) -> int | None:
    try:
        descriptor = os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        ours = info.st_uid == os.geteuid() or os.geteuid() == 0
        if ours and not os.listxattr(descriptor):
            return descriptor
    except OSError:
        pass
    os.close(descriptor)
    return None


def _clear_entry(dir_fd: int, name: str, node: Any) -> None:
    if node is None:
        beneath.remove_tree(dir_fd, name)
        return
    if node == _KEPT_FILE:
        return  # checked as a regular file under the world lock, with no code_exec in flight
    child = open_subdir(dir_fd, name)
    if child is None:  # no longer a real folder
        beneath.remove_tree(dir_fd, name)
        return
    try:
        info = os.fstat(child)
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(child, os.geteuid(), os.getegid())
        if stat.S_IMODE(info.st_mode) != fresh_directory_mode():
            os.fchmod(child, fresh_directory_mode())
        for entry in os.listdir(child):
            _clear_entry(child, entry, node.get(entry))
    finally:
        os.close(child)
