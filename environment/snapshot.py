"""Deterministic snapshots: the same world always gives the same tar.gz, byte for byte.

Members are ``filesystem/…`` then ``.apps_data/…`` (each tree sorted by path), regular files
and directories only. Normalised: mtime :data:`SNAPSHOT_MTIME`, uid/gid 0, empty user and
group names, mode 0644 (0755 for directories and executable files), PAX format, and a gzip
header with mtime 0 and no file name. A symlink is stored as the regular file it points to
when that file lies inside the same root; every other symlink, and every special file, is
left out, so nothing outside the world can leak into a snapshot.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from environment.populate import APPS_DATA, FILESYSTEM, WorldRoots

#: 2000-01-01T00:00:00Z — every member's mtime (a fixed date rather than 0, which some tools
#: show as "unknown" or treat as an error).
SNAPSHOT_MTIME = 946_684_800
COMPRESS_LEVEL = 6  # gzip's (and `tar czf`'s) default
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SnapshotInfo:
    """What was written: compressed size, sha256 of the archive, and counts."""

    size_bytes: int
    sha256: str
    files: int
    directories: int
    skipped: int


@dataclass(frozen=True)
class _Entry:
    member: str
    path: str
    is_dir: bool
    size: int
    executable: bool


def _walk(root: Path, prefix: str) -> tuple[list[_Entry], int]:
    """Every directory and regular file under ``root``, as sorted members; and how many were skipped."""
    entries = [_Entry(prefix, str(root), True, 0, True)]
    skipped = 0
    real_root = os.path.realpath(root)
    stack = [(str(root), prefix)]
    while stack:
        directory, member_dir = stack.pop()
        try:
            listing = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        for entry in listing:
            member = f"{member_dir}/{entry.name}"
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                resolved = _inside_file(entry.path, real_root)
                if resolved is None:
                    skipped += 1
                    continue
                info = os.stat(resolved)
                entries.append(_Entry(member, resolved, False, info.st_size, bool(info.st_mode & 0o100)))
            elif stat.S_ISDIR(info.st_mode):
                entries.append(_Entry(member, entry.path, True, 0, True))
                stack.append((entry.path, member))
            elif stat.S_ISREG(info.st_mode):
                entries.append(_Entry(member, entry.path, False, info.st_size, bool(info.st_mode & 0o100)))
            else:
                skipped += 1
    entries.sort(key=lambda e: e.member)
    return entries, skipped


def _inside_file(link: str, real_root: str) -> str | None:
    """The real path of a symlink's target when it is a regular file inside ``real_root``."""
    target = os.path.realpath(link)
    if os.path.commonpath([target, real_root]) != real_root:
        return None
    try:
        return target if stat.S_ISREG(os.stat(target).st_mode) else None
    except OSError:
        return None


def _tar_info(entry: _Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.member)
    info.mtime = SNAPSHOT_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if entry.is_dir:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    else:
        info.type = tarfile.REGTYPE
        info.mode = 0o755 if entry.executable else 0o644
        info.size = entry.size
    return info


class _HashingWriter(io.RawIOBase):
    """Passes writes to ``sink`` while computing their sha256 and size."""

    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sink.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)


def write_snapshot(roots: WorldRoots, sink: BinaryIO) -> SnapshotInfo:
    """Write the world's snapshot to ``sink``. Blocking: call from a worker thread.

    Raises OSError when a file cannot be read (or changes size while being read); the
    archive is then incomplete *and* lacks the gzip trailer, so it can never pass for valid.
    """
    hashing = _HashingWriter(sink)
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=COMPRESS_LEVEL)
    tar = tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT, bufsize=_CHUNK)  # noqa: SIM115
    try:
        files, directories, skipped = _add_world(roots, tar)
    except BaseException:
        # Detach the sink and mark the tar stream closed, so that no later close (or garbage
        # collection) writes a tar end or a gzip trailer after the failure.
        gz.fileobj = None
        tar.fileobj.closed = True  # type: ignore[attr-defined]
        tar.closed = True
        raise
    # Only a complete walk reaches these closes, which write the tar end and the gzip trailer.
    tar.close()
    gz.close()
    return SnapshotInfo(hashing.size, hashing.digest.hexdigest(), files, directories, skipped)


def _add_world(roots: WorldRoots, tar: tarfile.TarFile) -> tuple[int, int, int]:
    files = directories = skipped = 0
    for root, prefix in ((roots.fs_root, FILESYSTEM), (roots.apps_data_root, APPS_DATA)):
        entries, skipped_here = _walk(root, prefix)
        skipped += skipped_here
        for entry in entries:
            info = _tar_info(entry)
            if entry.is_dir:
                tar.addfile(info)
                directories += 1
                continue
            with open(entry.path, "rb", buffering=0) as source:
                if os.fstat(source.fileno()).st_size != entry.size:
                    raise OSError(f"file {entry.member!r} changed size while the snapshot was taken")
                tar.addfile(info, source)
            files += 1
    return files, directories, skipped


def iter_file(path: Path, chunk_size: int = _CHUNK) -> Iterator[bytes]:
    """The bytes of ``path`` in chunks (used to stream a finished snapshot)."""
    with open(path, "rb") as source:
        while chunk := source.read(chunk_size):
            yield chunk
