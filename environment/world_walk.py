"""Reading an untrusted world safely: the one walk that the snapshot and the manifest share.

The world is untrusted while it is read (``code_exec`` may still be writing), so:

- the trees are walked and files opened by directory descriptors beneath each root
  (:mod:`mcp_servers._core.beneath`); a symlink is followed only while it stays inside, and
  only to a regular file (which it then stands for); every other symlink and every special
  file is skipped;
- apparent sizes (``st_size``, also per file) and allocated sizes (``st_blocks``) are summed
  and capped (:class:`SnapshotLimits`) before anything is read, and the bytes actually read
  count against the apparent cap, so a file that grows while it is read cannot make a read
  of the world unbounded;
- holes are found with ``SEEK_DATA``/``SEEK_HOLE`` and never read; their total is capped
  (``max_sparse_bytes``), since the archive stores them as zeros that gzip must compress;
- the whole read has a deadline, checked between reads: it never holds the world lock longer
  than ``timeout_s``;
- a file is read again (up to :data:`COPY_ATTEMPTS` times) while two ``fstat`` calls around
  the read disagree (size, mtime or ctime), so what is kept is one consistent read.

:func:`environment.snapshot.write_snapshot` archives what :class:`WorldWalk` yields, and
:func:`environment.snapshot.build_manifest` hashes the same members: one walk, so the two can
never disagree about what the world holds.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypeVar

from atoll.errors import AtollError, ErrorCode
from atoll.members import APPS_DATA, FILESYSTEM
from environment.populate import WorldRoots
from mcp_servers._core import beneath

COPY_ATTEMPTS = 3
_CHUNK = 1 << 20
_IN_MEMORY = 8 * 1024**2  # files up to this size are copied to memory, larger ones to a temp file
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class SnapshotLimits:
    """What one read of the world may take: apparent and allocated bytes, and wall-clock time."""

    max_bytes: int = 8 * 1024**3
    max_allocated_bytes: int = 8 * 1024**3
    timeout_s: float = 300.0
    max_file_bytes: int = 2 * 1024**3
    max_sparse_bytes: int = 64 * 1024**2


class SnapshotTooLarge(AtollError):
    """The world holds more (apparent or allocated) bytes than a snapshot may read."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.snapshot_too_large, message)


class SnapshotTimeout(AtollError):
    """The snapshot did not finish within its deadline (the world lock is released)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(ErrorCode.snapshot_timeout, f"snapshot did not finish within {timeout_s:g} s")


@dataclass(frozen=True)
class Member:
    """One directory or regular file of the world, as the walk found it."""

    member: str  # filesystem/… or .apps_data/…
    path: str  # relative to its root ("" for the root itself)
    is_dir: bool
    executable: bool
    link: bool = False  # a symlink to a regular file inside the root: stands for that file
    #: a file's stat as the walk found it (a link's: of the file it leads to); None for a folder
    info: os.stat_result | None = None


class Budget:
    """Running totals against the limits, and the deadline."""

    def __init__(self, limits: SnapshotLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.timeout_s
        self.apparent = 0
        self.allocated = 0
        self.read = 0
        self.holes = 0

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise SnapshotTimeout(self.limits.timeout_s)

    def count(self, member: str, info: os.stat_result) -> None:
        if info.st_size > self.limits.max_file_bytes:
            raise SnapshotTooLarge(
                f"{member!r} is {info.st_size} bytes, more than the {self.limits.max_file_bytes} "
                "a snapshot takes of one file (ATOLL_SNAPSHOT_MAX_FILE_BYTES)"
            )
        self.apparent += info.st_size
        self.allocated += info.st_blocks * 512
        if self.apparent > self.limits.max_bytes:
            raise SnapshotTooLarge(
                f"the world holds more than {self.limits.max_bytes} bytes (apparent size, "
                f"reached at {member!r}, {info.st_size} bytes)"
            )
        if self.allocated > self.limits.max_allocated_bytes:
            raise SnapshotTooLarge(
                f"the world holds more than {self.limits.max_allocated_bytes} bytes on disk "
                f"(reached at {member!r})"
            )

    def count_holes(self, member: str, size: int) -> None:
        self.holes += max(size, 0)
        if self.holes > self.limits.max_sparse_bytes:
            raise SnapshotTooLarge(
                f"{member!r} is sparse: the world's files hold more than {self.limits.max_sparse_bytes} "
                "bytes of holes (ATOLL_SNAPSHOT_MAX_SPARSE_BYTES), which a snapshot would store as zeros"
            )

    def count_read(self, member: str, size: int) -> None:
        self.read += size
        if self.read > self.limits.max_bytes:
            raise SnapshotTooLarge(
                f"more than {self.limits.max_bytes} bytes read: {member!r} grew while the snapshot was taken"
            )


class WorldWalk:
    """Every member of the world in snapshot order, each with the descriptor of its root:
    ``filesystem`` and its tree sorted by path, then ``.apps_data`` and its tree. Both roots
    are always members (a missing root is an empty one). ``skipped`` counts what was left out
    (symlinks that do not lead to a file inside, special files, folders gone while listed);
    a consumer adds what it could not read any more."""

    def __init__(self, roots: WorldRoots, budget: Budget) -> None:
        self.roots = roots
        self.budget = budget
        self.skipped = 0

    def __iter__(self) -> Iterator[tuple[int, Member]]:
        for root, prefix in ((self.roots.fs_root, FILESYSTEM), (self.roots.apps_data_root, APPS_DATA)):
            try:
                root_fd = os.open(root, DIR_FLAGS)
            except FileNotFoundError:
                yield -1, Member(prefix, "", True, True)
                continue
            try:
                members, skipped = _walk(root_fd, prefix, self.budget)
                self.skipped += skipped
                for member in members:
                    yield root_fd, member
            finally:
                os.close(root_fd)


def _walk(root_fd: int, prefix: str, budget: Budget) -> tuple[list[Member], int]:
    """Every directory and regular file beneath ``root_fd``, as sorted members; and how many
    were skipped. Each directory is entered by descriptor, relative to its parent's, with
    ``O_NOFOLLOW``: a folder swapped for a symlink while the walk runs is not entered."""
    members = [Member(prefix, "", True, True)]
    skipped = 0
    stack: list[tuple[int, str]] = [(os.dup(root_fd), "")]
    try:
        while stack:
            directory_fd, relative_dir = stack.pop()
            try:
                with os.scandir(directory_fd) as listing:
                    listed = [(entry.name, entry.stat(follow_symlinks=False)) for entry in listing]
                for name, info in listed:
                    budget.check_time()
                    relative = f"{relative_dir}/{name}" if relative_dir else name
                    member = f"{prefix}/{relative}"
                    link = stat.S_ISLNK(info.st_mode)
                    if link:
                        target = _inside_file(root_fd, relative)
                        if target is None:
                            skipped += 1
                            continue
                        info = target
                    elif stat.S_ISDIR(info.st_mode):
                        try:
                            child = os.open(name, DIR_FLAGS, dir_fd=directory_fd)
                        except OSError:  # replaced since it was listed
                            skipped += 1
                            continue
                        stack.append((child, relative))
                        members.append(Member(member, relative, True, True))
                        continue
                    elif not stat.S_ISREG(info.st_mode):
                        skipped += 1
                        continue
                    budget.count(member, info)
                    members.append(Member(member, relative, False, bool(info.st_mode & 0o100), link, info))
            except FileNotFoundError:
                continue
            finally:
                os.close(directory_fd)
    finally:
        for directory_fd, _ in stack:
            os.close(directory_fd)
    members.sort(key=lambda m: m.member)
    return members, skipped


def _inside_file(root_fd: int, relative: str) -> os.stat_result | None:
    """The stat of what a symlink leads to, when that is a regular file inside the root."""
    try:
        info = beneath.stat(root_fd, relative, follow_symlinks=True)
    except OSError:  # outside the root (OutsideRoot), dangling, or a loop
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def open_member(root_fd: int, member: Member) -> tuple[int, os.stat_result] | None:
    """A read descriptor of the member's file (a symlink member: of the file it leads to, still
    beneath the root) and its ``fstat``, or None when it is gone or no longer a regular file.
    The caller closes the descriptor."""
    flags = _FILE_FLAGS & ~os.O_NOFOLLOW if member.link else _FILE_FLAGS
    try:
        descriptor = beneath.open_beneath(root_fd, member.path, flags)
    except OSError:
        return None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        return None
    return descriptor, info


class Sink(Protocol):
    """Where :func:`copy_data` puts a file's data regions: a seekable writable file, or a hasher."""

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int: ...
    def write(self, data: bytes, /) -> int | None: ...
    def truncate(self, size: int, /) -> int: ...
    def close(self) -> None: ...


_Sink = TypeVar("_Sink", bound=Sink)


def read_stable(
    descriptor: int,
    before: os.stat_result,
    member: str,
    budget: Budget,
    new_sink: Callable[[int], _Sink],
) -> tuple[_Sink, int, os.stat_result | None]:
    """Read the file into ``new_sink(size)`` until two ``fstat`` calls around the read agree
    (size, mtime, ctime) and the read saw the whole file, at most :data:`COPY_ATTEMPTS` times.

    Returns the sink, the bytes in holes, and the file's ``fstat`` when the read was stable
    (None when the file never stopped changing: the sink then holds the last read, which is
    still one read of the file). A sink with a true ``torn`` attribute saw the file shrink
    under it and counts as unstable. Holes are not counted here (the caller decides when).
    """
    sink: _Sink | None = None
    holes = 0
    for _ in range(COPY_ATTEMPTS):
        if sink is not None:
            sink.close()
        sink = new_sink(before.st_size)
        copied, holes = copy_data(descriptor, sink, member, budget)
        after = os.fstat(descriptor)
        if same_file_state(before, after) and copied == after.st_size and not getattr(sink, "torn", False):
            return sink, holes, after
        before = after
    assert sink is not None
    return sink, holes, None


def spool(size: int) -> BinaryIO:
    """A place for one file's copy: memory when small, else a temp file (holes stay holes)."""
    if size <= _IN_MEMORY:
        return io.BytesIO()
    return tempfile.TemporaryFile(prefix="atoll-snapshot-file-")  # noqa: SIM115


def stable_copy(root_fd: int, member: Member, budget: Budget) -> BinaryIO | None:
    """A stable copy of the member's file (rewound, holes counted), or None when it is no longer
    a regular file inside; see :func:`read_stable`. After :data:`COPY_ATTEMPTS` the last copy is
    used: at least one consistent read of a file that never stopped changing."""
    opened = open_member(root_fd, member)
    if opened is None:
        return None
    descriptor, before = opened
    with os.fdopen(descriptor, "rb", buffering=0):  # closes the descriptor
        copy, holes, _ = read_stable(descriptor, before, member.member, budget, spool)
        try:
            budget.count_holes(member.member, holes)  # before tarfile reads the holes as zeros
        except SnapshotTooLarge:
            copy.close()
            raise
        copy.seek(0)
        return copy


def copy_data(descriptor: int, sink: Sink, member: str, budget: Budget) -> tuple[int, int]:
    """Copy the file's data regions to ``sink`` at their offsets; holes are never read (a
    sparse file's copy takes no disk). Returns the size copied (the end of the file as read)
    and the bytes in holes. A file with more holes than the whole budget stops here, before
    any of its data is read."""
    offset = holes = 0
    while True:
        try:
            data = os.lseek(descriptor, offset, os.SEEK_DATA)
            hole = os.lseek(descriptor, data, os.SEEK_HOLE)
        except OSError:  # ENXIO: only a hole (or nothing) from ``offset`` to the end
            end = os.lseek(descriptor, 0, os.SEEK_END)
            holes += max(end - offset, 0)
            break
        holes += data - offset
        if budget.holes + holes > budget.limits.max_sparse_bytes:
            budget.count_holes(member, holes)
        position = data
        while position < hole:
            budget.check_time()
            chunk = os.pread(descriptor, min(_CHUNK, hole - position), position)
            if not chunk:
                break
            budget.count_read(member, len(chunk))
            sink.seek(position)
            sink.write(chunk)
            position += len(chunk)
        offset = hole
    current = sink.seek(0, os.SEEK_END)
    if current < end:  # a hole at the end: one zero byte extends the copy (sparse on disk)
        sink.seek(end - 1)
        sink.write(b"\0")
    elif current > end:  # shrank since a region was read: the fstat check reads it again
        sink.truncate(end)
    return end, holes


def same_file_state(first: os.stat_result, second: os.stat_result) -> bool:
    """Whether two ``fstat`` calls around a read show a file that did not change meanwhile."""
    return (first.st_size, first.st_mtime_ns, first.st_ctime_ns) == (
        second.st_size,
        second.st_mtime_ns,
        second.st_ctime_ns,
    )
