"""The deterministic world archive: the one writer of ``/data/snapshot``'s tar.gz.

The environment writes a world's snapshot with it, and the artifact store rebuilds the same
archive from a manifest and its blobs (:mod:`atoll.world_manifest`) with it, so both give the
same bytes for the same world: members ``filesystem/…`` then ``.apps_data/…`` in the order
given (each tree sorted by path), directories and regular files only, mtime
:data:`SNAPSHOT_MTIME`, uid/gid 0, empty user and group names, mode 0644 (0755 for
directories and executable files), PAX format, and a gzip header with mtime 0 and no name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import SupportsRead

#: 2000-01-01T00:00:00Z — every member's mtime (a fixed date rather than 0, which some tools
#: show as "unknown" or treat as an error).
SNAPSHOT_MTIME = 946_684_800
COMPRESS_LEVEL = 6  # gzip's (and `tar czf`'s) default
_CHUNK = 1 << 20


def tar_member(member: str, *, is_dir: bool, executable: bool = False, size: int = 0) -> tarfile.TarInfo:
    """The normalised header of one archive member."""
    info = tarfile.TarInfo(member)
    info.mtime = SNAPSHOT_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if is_dir:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    else:
        info.type = tarfile.REGTYPE
        info.mode = 0o755 if executable else 0o644
        info.size = size
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


class ArchiveWriter:
    """Streams a deterministic world archive to ``sink``; :meth:`finish` writes the tar end and
    the gzip trailer and gives (size, sha256) of what was written. :meth:`abort` leaves the
    archive without them, so an archive cut short can never pass for a valid one."""

    def __init__(self, sink: BinaryIO) -> None:
        self._hashing = _HashingWriter(sink)
        self._gz = gzip.GzipFile(
            filename="", mode="wb", fileobj=self._hashing, mtime=0, compresslevel=COMPRESS_LEVEL
        )
        self._tar = tarfile.open(  # noqa: SIM115
            fileobj=self._gz, mode="w|", format=tarfile.PAX_FORMAT, bufsize=_CHUNK
        )

    def add_directory(self, member: str) -> None:
        self._tar.addfile(tar_member(member, is_dir=True))

    def add_file(
        self, member: str, source: SupportsRead[bytes], size: int, *, executable: bool = False
    ) -> None:
        """One regular file of ``size`` bytes read from ``source`` (which must hold them)."""
        self._tar.addfile(tar_member(member, is_dir=False, executable=executable, size=size), source)

    def finish(self) -> tuple[int, str]:
        self._tar.close()
        self._gz.close()
        return self._hashing.size, self._hashing.digest.hexdigest()

    def abort(self) -> None:
        # Detach the sink and mark the tar stream closed, so that no later close (or garbage
        # collection) writes a tar end or a gzip trailer after the failure.
        self._gz.fileobj = None  # type: ignore[assignment]  # detached on purpose: no trailer
        self._tar.fileobj.closed = True  # type: ignore[attr-defined]
        self._tar.closed = True  # type: ignore[attr-defined]  # TarFile's own flag, not in the stubs


__all__ = ["COMPRESS_LEVEL", "SNAPSHOT_MTIME", "ArchiveWriter", "tar_member"]
