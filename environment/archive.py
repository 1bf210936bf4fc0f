"""Safe extraction of untrusted archives (tar, tar.gz/bz2/xz, zip) and folders into a fresh directory.

Every member passes one gate, :class:`SafeExtractor`, which refuses (with
:class:`UnsafeArchive`, naming the member) absolute paths, ``..``, symlinks or hardlinks that
point out of their root, device files and FIFOs, writes through symlinks, and archives that
exceed the size, member-count or compression-ratio limits. The extractor only ever writes
into staging directories it was given; moving the result into the world is ``populate``'s job.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from atoll.errors import AtollError
from environment.gunzip import ForwardOnly, ThreadedGunzip

_CHUNK = 1 << 20
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafeArchive(AtollError):
    """An archive member (or the archive as a whole) that extraction refuses."""

    def __init__(self, member: str, problem: str, code: str = "unsafe_archive") -> None:
        super().__init__(code, f"archive member {member!r}: {problem}" if member else f"archive: {problem}")
        self.member = member


@dataclass(frozen=True)
class ArchiveLimits:
    """What one populate may write: bytes, members, and the compression ratio of each source."""

    max_bytes: int = 8 * 1024**3
    max_members: int = 200_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 32 * 1024**2

    @property
    def max_archive_file_bytes(self) -> int:
        """Most bytes an archive *file* (compressed) may have before it is spooled to disk.

        An archive that may unpack to at most ``max_bytes`` is not much bigger than that even
        when its data does not compress: tar headers and padding, gzip and zip framing, and a
        multipart envelope add well under 5% + 1 MiB. Anything larger cannot be extracted
        within the limit, so it is refused before it fills the disk.
        """
        return self.max_bytes + self.max_bytes // 20 + 1024**2


def copy_capped(source: BinaryIO, target: BinaryIO, limit: int, label: str) -> None:
    """Copy ``source`` to ``target``; UnsafeArchive (``archive_too_large``) past ``limit`` bytes."""
    copied = 0
    while chunk := source.read(_CHUNK):
        copied += len(chunk)
        if copied > limit:
            raise UnsafeArchive("", f"{label} is larger than {limit} bytes", "archive_too_large")
        target.write(chunk)


#: Maps a cleaned member name to (staging root, path inside it), or None to skip the member.
Router = Callable[[str], "tuple[Path, str] | None"]


def clean_member_name(name: str) -> str | None:
    """The member's relative POSIX path, or None for the archive root itself ("." or "./").

    Raises UnsafeArchive for absolute paths, drive letters, backslashes, NUL and ``..``.
    """
    if "\x00" in name:
        raise UnsafeArchive(name, "name contains a NUL byte")
    if name.startswith("/") or _WINDOWS_DRIVE.match(name):
        raise UnsafeArchive(name, "absolute path")
    if "\\" in name:
        raise UnsafeArchive(name, "backslash in path (archives must use '/')")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(name, "path contains '..'")
    return "/".join(parts) or None


class _CountingReader(ForwardOnly):
    """Counts the compressed bytes read, to measure the expansion ratio."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self._position = 0

    @property
    def count(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self._position += len(data)
        return data


class SafeExtractor:
    """Writes members into staging roots, enforcing the safety rules and limits across one populate."""

    def __init__(self, router: Router, limits: ArchiveLimits) -> None:
        self.router = router
        self.limits = limits
        self.members = 0
        self.files = 0
        self.bytes_written = 0
        # Per source: compressed bytes read so far (callable) and bytes written at its start.
        self._compressed: Callable[[], int] = lambda: 0
        self._source_start = 0
        self._directories: set[tuple[Path, str]] = set()

    # -- per-source bookkeeping -------------------------------------------------------------

    def begin_source(self, compressed_bytes: Callable[[], int]) -> None:
        self._compressed = compressed_bytes
        self._source_start = self.bytes_written

    def _count_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise UnsafeArchive(
                name, f"more than {self.limits.max_members} members in one populate", "archive_too_large"
            )

    def _check_ratio(self, name: str) -> None:
        expanded = self.bytes_written - self._source_start
        if expanded < self.limits.ratio_floor_bytes:
            return
        compressed = max(self._compressed(), 1)
        if expanded / compressed > self.limits.max_ratio:
            raise UnsafeArchive(
                name,
                f"expands {expanded} bytes from {compressed} compressed bytes "
                f"(ratio above {self.limits.max_ratio:g}): decompression bomb",
                "archive_too_large",
            )

    # -- targets --------------------------------------------------------------------------

    def _target(self, name: str) -> tuple[Path, str, Path] | None:
        cleaned = clean_member_name(name)
        if cleaned is None:
            return None
        routed = self.router(cleaned)
        if routed is None:
            return None
        root, relative = routed
        if not relative:
            return None
        return root, relative, root / relative

    def _make_parents(self, name: str, root: Path, relative: str) -> None:
        """Create the parent directories of ``relative`` without ever passing through a symlink."""
        parent = relative.rpartition("/")[0]
        if not parent or (root, parent) in self._directories:
            return
        current = root
        for part in parent.split("/"):
            current = current / part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o755)
                continue
            if stat.S_ISLNK(info.st_mode):
                raise UnsafeArchive(name, f"path goes through the symlink {part!r}")
            if not stat.S_ISDIR(info.st_mode):
                raise UnsafeArchive(name, f"parent {part!r} is not a directory")
        # Staging is written by this extractor alone, and a directory here can never be
        # replaced (``_clear`` refuses), so a checked parent stays safe: skip the lstats next time.
        self._directories.add((root, parent))

    @staticmethod
    def _clear(name: str, path: Path) -> None:
        """Make room for a member whose name appeared before (the later one wins, as with tar)."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            raise UnsafeArchive(name, "a directory of the same name is already in the archive")
        os.unlink(path)

    # -- members --------------------------------------------------------------------------

    def add_directory(self, name: str) -> None:
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        self._make_parents(name, root, relative)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o755)
            return
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeArchive(name, "a file of the same name is already in the archive")

    def add_file(self, name: str, source: BinaryIO, size: int, executable: bool, mtime: float | None) -> None:
        """Copy ``size`` bytes from ``source``; refuses before writing when the limits would be passed."""
        self._count_member(name)
        if self.bytes_written + size > self.limits.max_bytes:
            raise UnsafeArchive(
                name, f"populate would write more than {self.limits.max_bytes} bytes", "archive_too_large"
            )
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        self._make_parents(name, root, relative)
        self._clear(name, path)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "wb", buffering=0) as sink:
            remaining = size
            while remaining > 0:
                chunk = source.read(min(_CHUNK, remaining))
                if not chunk:
                    raise UnsafeArchive(name, "archive ends inside this member (truncated)")
                sink.write(chunk)
                remaining -= len(chunk)
                self.bytes_written += len(chunk)
                self._check_ratio(name)
            if executable:
                os.fchmod(sink.fileno(), 0o755)
        self.files += 1
        if mtime is not None:
            os.utime(path, (mtime, mtime), follow_symlinks=False)

    def add_symlink(self, name: str, link_target: str) -> None:
        """A symlink is kept only when it resolves inside its own root."""
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        if not link_target or link_target.startswith("/") or "\x00" in link_target:
            raise UnsafeArchive(name, f"symlink points outside the world ({link_target!r})")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(relative), link_target))
        if resolved == ".." or resolved.startswith("../"):
            raise UnsafeArchive(name, f"symlink points outside the world ({link_target!r})")
        self._make_parents(name, root, relative)
        self._clear(name, path)
        os.symlink(link_target, path)

    def add_hardlink(self, name: str, link_target: str) -> None:
        """A hardlink becomes a copy of an earlier member of the same root; anything else is refused."""
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        try:
            source_target = self._target(link_target)
        except UnsafeArchive as exc:
            raise UnsafeArchive(name, f"hardlink points outside the world ({link_target!r})") from exc
        if source_target is None or source_target[0] != root:
            raise UnsafeArchive(name, f"hardlink points outside its root ({link_target!r})")
        source_path = source_target[2]
        try:
            info = os.lstat(source_path)
        except FileNotFoundError:
            raise UnsafeArchive(
                name, f"hardlink to a member not extracted before ({link_target!r})"
            ) from None
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeArchive(name, f"hardlink to something that is not a regular file ({link_target!r})")
        if self.bytes_written + info.st_size > self.limits.max_bytes:
            raise UnsafeArchive(
                name, f"populate would write more than {self.limits.max_bytes} bytes", "archive_too_large"
            )
        self._make_parents(name, root, relative)
        self._clear(name, path)
        shutil.copyfile(source_path, path, follow_symlinks=False)
        self.bytes_written += info.st_size
        self.files += 1


# -- readers: each turns one source into extractor calls ------------------------------------


def extract_tar(stream: BinaryIO, extractor: SafeExtractor, compression: str = "gz") -> None:
    """Read a tar through ``extractor``, front to back (``stream`` needs no seek).

    ``compression`` is ``gz``, ``bz2``, ``xz`` or ``""`` (plain tar).
    """
    counting = _CountingReader(stream)
    source: Any = counting
    if compression == "gz":
        # Inflate on a second thread (as `tar xzf` runs gzip beside tar) and count the
        # compressed bytes it consumed, for the ratio check.
        source = ThreadedGunzip(counting)
    elif compression:
        # The bz2/xz readers refuse to seek over an unseekable file; this wrapper seeks forward.
        source = _CountingReader(_decompressor(counting, compression))
    extractor.begin_source(lambda: counting.count)
    try:
        # Normal ("r:") mode over a forward-only reader: tarfile only ever seeks forward here,
        # and avoids stream mode's re-slicing of its buffer on every read.
        archive = tarfile.open(fileobj=source, mode="r:")  # noqa: SIM115
        with archive:
            while (member := archive.next()) is not None:
                _extract_tar_member(archive, member, extractor)
                archive.members.clear()  # constant memory for archives of many members
    except _CORRUPT as exc:
        raise UnsafeArchive("", f"corrupt or truncated archive ({exc})", "bad_archive") from exc
    finally:
        if isinstance(source, ThreadedGunzip):
            source.close()


_CORRUPT = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)


def _decompressor(raw: _CountingReader, compression: str) -> BinaryIO:
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[arg-type]
    if compression == "bz2":
        return bz2.BZ2File(raw, mode="rb")  # type: ignore[arg-type]
    if compression == "xz":
        return lzma.LZMAFile(raw, mode="rb")  # type: ignore[arg-type]
    raise ValueError(f"unknown compression {compression!r}")


def _extract_tar_member(archive: tarfile.TarFile, member: tarfile.TarInfo, extractor: SafeExtractor) -> None:
    name = member.name
    if member.isdir():
        extractor.add_directory(name)
    elif member.isreg():
        source = archive.extractfile(member)
        assert source is not None
        extractor.add_file(name, source, member.size, bool(member.mode & 0o111), member.mtime)
    elif member.issym():
        extractor.add_symlink(name, member.linkname)
    elif member.islnk():
        extractor.add_hardlink(name, member.linkname)
    elif member.ischr() or member.isblk():
        raise UnsafeArchive(name, "device files are not allowed")
    elif member.isfifo():
        raise UnsafeArchive(name, "FIFOs are not allowed")
    else:
        raise UnsafeArchive(name, f"unsupported member type {member.type!r}")


def extract_zip(path_or_file: str | Path | BinaryIO, extractor: SafeExtractor) -> None:
    """Extract a zip (needs a seekable file); symlink entries obey the same rules as in tar."""
    try:
        archive = zipfile.ZipFile(path_or_file)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeArchive("", f"not a readable zip archive ({exc})", "bad_archive") from exc
    compressed = 0
    extractor.begin_source(lambda: compressed)
    with archive:
        infos = archive.infolist()
        if len(infos) + extractor.members > extractor.limits.max_members:
            raise UnsafeArchive(
                "", f"more than {extractor.limits.max_members} members in one populate", "archive_too_large"
            )
        for info in infos:
            compressed += info.compress_size
            mode = info.external_attr >> 16
            if info.is_dir():
                extractor.add_directory(info.filename)
            elif stat.S_ISLNK(mode):
                with archive.open(info) as source:  # a link target is short: never read a bomb whole
                    target = source.read(4097)
                if len(target) > 4096:
                    raise UnsafeArchive(info.filename, "symlink target longer than 4096 bytes")
                extractor.add_symlink(info.filename, target.decode("utf-8", "replace"))
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode):
                raise UnsafeArchive(info.filename, "device files and FIFOs are not allowed")
            else:
                try:
                    with archive.open(info) as source:
                        extractor.add_file(
                            info.filename, source, info.file_size, bool(mode & 0o111), _zip_mtime(info)
                        )
                except (zipfile.BadZipFile, EOFError, NotImplementedError) as exc:
                    raise UnsafeArchive(info.filename, f"cannot be read ({exc})", "bad_archive") from exc


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    import datetime

    try:
        return datetime.datetime(*info.date_time).timestamp()
    except ValueError:
        return None


def copy_local_folder(folder: Path, extractor: SafeExtractor) -> None:
    """Copy a local folder; its symlinks are judged like archive symlinks (never followed)."""
    extractor.begin_source(lambda: 1 << 62)  # a folder is not compressed: no ratio to enforce
    for directory, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        relative_dir = Path(directory).relative_to(folder).as_posix()
        prefix = "" if relative_dir == "." else relative_dir + "/"
        for dirname in list(dirnames):
            full = Path(directory, dirname)
            if full.is_symlink():
                dirnames.remove(dirname)
                extractor.add_symlink(prefix + dirname, os.readlink(full))
            else:
                extractor.add_directory(prefix + dirname)
        for filename in sorted(filenames):
            full = Path(directory, filename)
            info = os.lstat(full)
            name = prefix + filename
            if stat.S_ISLNK(info.st_mode):
                extractor.add_symlink(name, os.readlink(full))
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as source:
                    extractor.add_file(name, source, info.st_size, bool(info.st_mode & 0o111), info.st_mtime)
            else:
                raise UnsafeArchive(name, "device files, FIFOs and sockets are not allowed")
