"""Readers that turn one source (tar, zip, local folder) into :class:`SafeExtractor` calls.

Every read of member data goes through :class:`_MemberReader`, so a corrupt, truncated or
encrypted member is an UnsafeArchive naming it (a 4xx), never a bare library error.
"""

from __future__ import annotations

import bz2
import datetime
import gzip
import lzma
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from atoll.errors import ErrorCode
from atoll.members import UnsafeArchive, is_zip_symlink, zip_file_type, zip_mode
from environment.archive import LocalFile, SafeExtractor
from environment.gunzip import ForwardOnly, ThreadedGunzip

if TYPE_CHECKING:
    from _typeshed import SupportsRead

_CORRUPT = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
    lzma.LZMAError,
    struct.error,
    NotImplementedError,  # a zip compression method Python cannot read
    ValueError,
)
_ZIP_ENCRYPTED = 0x1
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then file name and extra field lengths
_LOCAL_SIGNATURE = b"PK\x03\x04"


class _CountingReader(ForwardOnly):
    """Counts the compressed bytes read, to measure the expansion ratio."""

    def __init__(self, raw: SupportsRead[bytes]) -> None:
        self.raw = raw
        self._position = 0

    @property
    def count(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self._position += len(data)
        return data


class _MemberReader:
    """Reads one member's data; a decoding failure becomes UnsafeArchive naming the member."""

    def __init__(self, raw: Any, member: str) -> None:
        self.raw = raw
        self.member = member

    def read(self, size: int = -1) -> bytes:
        try:
            return self.raw.read(size)
        except _CORRUPT as exc:
            raise UnsafeArchive(
                self.member, f"corrupt or truncated data ({exc})", ErrorCode.bad_archive
            ) from None
        except OSError as exc:  # bz2 reports bad data as OSError
            raise UnsafeArchive(self.member, f"cannot be read ({exc})", ErrorCode.bad_archive) from None


# -- tar --------------------------------------------------------------------------------


def extract_tar(stream: SupportsRead[bytes], extractor: SafeExtractor, compression: str = "gz") -> None:
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
                archive.members.clear()  # type: ignore[attr-defined]  # TarFile's list, not in the stubs; constant memory for archives of many members
    except _CORRUPT as exc:
        raise UnsafeArchive("", f"corrupt or truncated archive ({exc})", ErrorCode.bad_archive) from exc
    finally:
        if isinstance(source, ThreadedGunzip):
            source.close()


def _decompressor(raw: _CountingReader, compression: str) -> SupportsRead[bytes]:
    if compression == "bz2":
        return bz2.BZ2File(raw, mode="rb")
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
        extractor.add_file(
            name, _MemberReader(source, name), member.size, bool(member.mode & 0o111), member.mtime
        )
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


# -- zip --------------------------------------------------------------------------------


def extract_zip(path_or_file: str | Path | BinaryIO, extractor: SafeExtractor) -> None:
    """Extract a zip (needs a seekable file); symlink entries obey the same rules as in tar.

    Refused before anything is written: members whose byte ranges overlap (one compressed
    stream counted many times: a bomb past any ratio check) and encrypted members.
    """
    try:
        archive = zipfile.ZipFile(path_or_file)
    except (zipfile.BadZipFile, OSError, *_CORRUPT) as exc:
        raise UnsafeArchive("", f"not a readable zip archive ({exc})", ErrorCode.bad_archive) from exc
    with archive:
        infos = archive.infolist()
        if len(infos) + extractor.members > extractor.limits.max_members:
            raise UnsafeArchive(
                "",
                f"more than {extractor.limits.max_members} members in one populate",
                ErrorCode.archive_too_large,
            )
        _check_zip_layout(archive, infos)
        compressed = 0
        extractor.begin_source(lambda: compressed)
        for info in infos:
            compressed += info.compress_size  # real bytes: the ranges were shown not to overlap
            _extract_zip_member(archive, info, extractor)


def _check_zip_layout(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse encrypted members and members whose local header + data share bytes."""
    assert archive.fp is not None
    size = archive.fp.seek(0, os.SEEK_END)
    spans: list[tuple[int, int, str]] = []
    for info in infos:
        if info.flag_bits & _ZIP_ENCRYPTED:
            raise UnsafeArchive(
                info.filename,
                "is encrypted (password-protected zips cannot be populated)",
                ErrorCode.bad_archive,
            )
        archive.fp.seek(info.header_offset)
        header = archive.fp.read(_LOCAL_HEADER.size)
        if len(header) < _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
            raise UnsafeArchive(
                info.filename, "corrupt zip entry (no local header where it should be)", ErrorCode.bad_archive
            )
        _, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        end = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length + info.compress_size
        if end > size:
            raise UnsafeArchive(
                info.filename,
                "corrupt zip entry (its data runs past the end of the file)",
                ErrorCode.bad_archive,
            )
        spans.append((info.header_offset, end, info.filename))
    spans.sort()
    for (_, previous_end, previous), (start, _, name) in zip(spans, spans[1:], strict=False):
        if start < previous_end:
            raise UnsafeArchive(
                name,
                f"overlaps the bytes of member {previous!r} (overlapping zip entries: a decompression bomb)",
                ErrorCode.archive_too_large,
            )


def _extract_zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, extractor: SafeExtractor) -> None:
    file_type = zip_file_type(info)
    name = info.filename
    if info.is_dir():
        extractor.add_directory(name)
        return
    if file_type in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO):
        raise UnsafeArchive(name, "device files and FIFOs are not allowed")
    try:
        source = archive.open(info)
    except (*_CORRUPT, RuntimeError) as exc:  # RuntimeError: encrypted (caught above, kept safe)
        raise UnsafeArchive(name, f"cannot be read ({exc})", ErrorCode.bad_archive) from None
    with source:
        reader = _MemberReader(source, name)
        if is_zip_symlink(info):
            target = reader.read(4097)  # a link target is short: never read a bomb whole
            if len(target) > 4096:
                raise UnsafeArchive(name, "symlink target longer than 4096 bytes")
            extractor.add_symlink(name, target.decode("utf-8", "replace"))
            return
        # ZipExtFile stops at the declared size and checks the CRC there, so a member that
        # lies about its size is caught as corrupt.
        executable = bool(zip_mode(info) & 0o111)
        extractor.add_file(name, reader, info.file_size, executable, _zip_mtime(info))


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    try:
        return datetime.datetime(*info.date_time).timestamp()
    except ValueError:
        return None


# -- folders ----------------------------------------------------------------------------


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
                descriptor = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                with os.fdopen(descriptor, "rb", buffering=0):  # closes the descriptor
                    opened = os.fstat(descriptor)
                    if not stat.S_ISREG(opened.st_mode):  # swapped since it was listed
                        raise UnsafeArchive(name, "device files, FIFOs and sockets are not allowed")
                    # Copied in the kernel (reflink or copy_file_range): the bytes never pass
                    # through Python.
                    extractor.add_file(
                        name, LocalFile(descriptor), opened.st_size, bool(info.st_mode & 0o111), info.st_mtime
                    )
            else:
                raise UnsafeArchive(name, "device files, FIFOs and sockets are not allowed")
