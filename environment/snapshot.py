"""Deterministic snapshots: the same world always gives the same tar.gz, byte for byte.

Members are ``filesystem/…`` then ``.apps_data/…`` (each tree sorted by path), regular files
and directories only. Normalised: mtime :data:`atoll.world_archive.SNAPSHOT_MTIME`, uid/gid 0, empty user and
group names, mode 0644 (0755 for directories and executable files), PAX format, and a gzip
header with mtime 0 and no file name. A symlink is stored as the regular file it points to
when that file lies inside the same root; every other symlink, and every special file, is
left out, so nothing outside the world can leak into a snapshot.

The world is untrusted while it is read (``code_exec`` may still be writing), so:

- the trees are walked and files opened by directory descriptors beneath each root
  (:mod:`mcp_servers._core.beneath`); a symlink is followed only while it stays inside;
- apparent sizes (``st_size``, also per file) and allocated sizes (``st_blocks``) are summed
  and capped (:class:`SnapshotLimits`) before anything is read, and the bytes actually read
  count against the apparent cap, so a file that grows while it is read cannot make a
  snapshot unbounded;
- holes are found with ``SEEK_DATA``/``SEEK_HOLE`` and never read, but the archive stores
  them as zeros that gzip must compress (six 1 GiB sparse files: about a minute): their
  total is capped (``max_sparse_bytes``) and a file past it is refused at once, naming it.
  The disk cap bounds the data a world holds, this cap the holes, so the time a snapshot
  takes is bounded by what the world really occupies;
- the whole build has a deadline, checked between reads: a snapshot never holds the world
  lock longer than ``timeout_s``;
- each file is copied (to memory when small, else to a temp file) and archived from that
  copy, with the copy's own size: a file that changes while it is read is copied again
  (up to :data:`COPY_ATTEMPTS` times) until two ``fstat`` calls around the copy agree, and
  never makes the archive disagree with its headers.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from typing import BinaryIO

from atoll.errors import AtollError
from atoll.members import APPS_DATA, FILESYSTEM
from atoll.world_archive import ArchiveWriter
from environment.populate import WorldRoots
from mcp_servers._core import beneath

COPY_ATTEMPTS = 3
_CHUNK = 1 << 20
_IN_MEMORY = 8 * 1024**2  # files up to this size are copied to memory, larger ones to a temp file
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class SnapshotLimits:
    """What one snapshot may read: apparent and allocated bytes, and wall-clock time."""

    max_bytes: int = 8 * 1024**3
    max_allocated_bytes: int = 8 * 1024**3
    timeout_s: float = 300.0
    max_file_bytes: int = 2 * 1024**3
    max_sparse_bytes: int = 64 * 1024**2


class SnapshotTooLarge(AtollError):
    """The world holds more (apparent or allocated) bytes than a snapshot may read."""

    def __init__(self, message: str) -> None:
        super().__init__("snapshot_too_large", message)


class SnapshotTimeout(AtollError):
    """The snapshot did not finish within its deadline (the world lock is released)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__("snapshot_timeout", f"snapshot did not finish within {timeout_s:g} s")


@dataclass(frozen=True)
class SnapshotInfo:
    """What was written: compressed size, sha256 of the archive, counts and sizes read."""

    size_bytes: int
    sha256: str
    files: int
    directories: int
    skipped: int
    apparent_bytes: int = 0
    allocated_bytes: int = 0


@dataclass(frozen=True)
class _Entry:
    member: str
    path: str  # relative to its root ("" for the root itself)
    is_dir: bool
    executable: bool
    link: bool = False  # a symlink to a regular file inside the root: stored as that file


class _Budget:
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


def _walk(root_fd: int, prefix: str, budget: _Budget) -> tuple[list[_Entry], int]:
    """Every directory and regular file beneath ``root_fd``, as sorted members; and how many
    were skipped. Each directory is entered by descriptor, relative to its parent's, with
    ``O_NOFOLLOW``: a folder swapped for a symlink while the walk runs is not entered."""
    entries = [_Entry(prefix, "", True, True)]
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
                            child = os.open(name, _DIR_FLAGS, dir_fd=directory_fd)
                        except OSError:  # replaced since it was listed
                            skipped += 1
                            continue
                        stack.append((child, relative))
                        entries.append(_Entry(member, relative, True, True))
                        continue
                    elif not stat.S_ISREG(info.st_mode):
                        skipped += 1
                        continue
                    budget.count(member, info)
                    entries.append(_Entry(member, relative, False, bool(info.st_mode & 0o100), link))
            except FileNotFoundError:
                continue
            finally:
                os.close(directory_fd)
    finally:
        for directory_fd, _ in stack:
            os.close(directory_fd)
    entries.sort(key=lambda e: e.member)
    return entries, skipped


def _inside_file(root_fd: int, relative: str) -> os.stat_result | None:
    """The stat of what a symlink leads to, when that is a regular file inside the root."""
    try:
        info = beneath.stat(root_fd, relative, follow_symlinks=True)
    except OSError:  # outside the root (OutsideRoot), dangling, or a loop
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def write_snapshot(roots: WorldRoots, sink: BinaryIO, limits: SnapshotLimits | None = None) -> SnapshotInfo:
    """Write the world's snapshot to ``sink``. Blocking: call from a worker thread.

    Raises SnapshotTooLarge and SnapshotTimeout (AtollError) past ``limits``, OSError when a
    root cannot be read; the archive is then incomplete *and* lacks the gzip trailer, so it
    can never pass for valid.
    """
    budget = _Budget(limits or SnapshotLimits())
    writer = ArchiveWriter(sink)
    try:
        files, directories, skipped = _add_world(roots, writer, budget)
    except BaseException:
        writer.abort()
        raise
    # Only a complete walk reaches this, which writes the tar end and the gzip trailer.
    size, sha256 = writer.finish()
    return SnapshotInfo(size, sha256, files, directories, skipped, budget.apparent, budget.allocated)


def _add_world(roots: WorldRoots, writer: ArchiveWriter, budget: _Budget) -> tuple[int, int, int]:
    files = directories = skipped = 0
    for root, prefix in ((roots.fs_root, FILESYSTEM), (roots.apps_data_root, APPS_DATA)):
        try:
            root_fd = os.open(root, _DIR_FLAGS)
        except FileNotFoundError:
            writer.add_directory(prefix)
            directories += 1
            continue
        try:
            entries, skipped_here = _walk(root_fd, prefix, budget)
            skipped += skipped_here
            for entry in entries:
                if entry.is_dir:
                    writer.add_directory(entry.member)
                    directories += 1
                    continue
                copy = _copy(root_fd, entry, budget)
                if copy is None:  # gone, or replaced by something that is not a file inside
                    skipped += 1
                    continue
                with copy:
                    size = copy.seek(0, os.SEEK_END)
                    copy.seek(0)
                    writer.add_file(entry.member, _Deadline(copy, budget), size, executable=entry.executable)
                files += 1
        finally:
            os.close(root_fd)
    return files, directories, skipped


def _copy(root_fd: int, entry: _Entry, budget: _Budget) -> BinaryIO | None:
    """A stable copy of the file (rewound), or None when it is no longer a regular file inside.

    Copied again while the file changes during the copy (size, mtime or ctime differ between
    the ``fstat`` before and after); after :data:`COPY_ATTEMPTS` the last copy is used, which
    is at least one consistent read of a file that never stopped changing.
    """
    flags = _FILE_FLAGS & ~os.O_NOFOLLOW if entry.link else _FILE_FLAGS
    try:
        descriptor = beneath.open_beneath(root_fd, entry.path, flags)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb", buffering=0):  # closes the descriptor
        before = os.fstat(descriptor)
        if not stat.S_ISREG(before.st_mode):
            return None
        copy: BinaryIO | None = None
        holes = 0
        for _ in range(COPY_ATTEMPTS):
            if copy is not None:
                copy.close()
            copy = _spool(before.st_size)
            copied, holes = _copy_data(descriptor, copy, entry.member, budget)
            after = os.fstat(descriptor)
            if _same(before, after) and copied == after.st_size:
                break
            before = after
        assert copy is not None
        try:
            budget.count_holes(entry.member, holes)  # before tarfile reads the holes as zeros
        except SnapshotTooLarge:
            copy.close()
            raise
        copy.seek(0)
        return copy


def _copy_data(descriptor: int, copy: BinaryIO, member: str, budget: _Budget) -> tuple[int, int]:
    """Copy the file's data regions to ``copy`` at their offsets; holes stay holes (a sparse
    file's copy takes no disk). Returns the size copied (the end of the file as read) and the
    bytes in holes. A file with more holes than the snapshot's whole budget stops here, before
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
            copy.seek(position)
            copy.write(chunk)
            position += len(chunk)
        offset = hole
    current = copy.seek(0, os.SEEK_END)
    if current < end:  # a hole at the end: one zero byte extends the copy (sparse on disk)
        copy.seek(end - 1)
        copy.write(b"\0")
    elif current > end:  # shrank since a region was read: the fstat check copies it again
        copy.truncate(end)
    return end, holes


def _same(first: os.stat_result, second: os.stat_result) -> bool:
    return (first.st_size, first.st_mtime_ns, first.st_ctime_ns) == (
        second.st_size,
        second.st_mtime_ns,
        second.st_ctime_ns,
    )


def _spool(size: int) -> BinaryIO:
    if size <= _IN_MEMORY:
        return io.BytesIO()
    return tempfile.TemporaryFile(prefix="atoll-snapshot-file-")  # noqa: SIM115


class _Deadline:
    """A reader that checks the snapshot's deadline while tarfile copies it into the archive."""

    def __init__(self, raw: BinaryIO, budget: _Budget) -> None:
        self.raw = raw
        self.budget = budget

    def read(self, size: int = -1) -> bytes:
        self.budget.check_time()
        return self.raw.read(size)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        self.budget.check_time()
        return self.raw.readinto(buffer)  # type: ignore[attr-defined]
