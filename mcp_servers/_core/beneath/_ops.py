"""File operations beneath a directory descriptor, built on :mod:`._resolve`."""

from __future__ import annotations

import ctypes
import errno
import io
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import BinaryIO

from mcp_servers._core.beneath._resolve import (
    _DIR_FLAGS,
    PathLike,
    _closing,
    _libc,
    _parts,
    _text,
    locate,
    open_beneath,
    open_dir,
    parent_of,
)

_RENAME_NOREPLACE = 1


def open_file(dir_fd: int, path: PathLike) -> BinaryIO:
    """A binary read-only file object of the regular file ``path``.

    Raises IsADirectoryError for a folder and PermissionError for anything else that is
    not a regular file; opened with ``O_NONBLOCK`` first, so a FIFO never blocks the call.
    """
    fd = open_beneath(dir_fd, path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat_module.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), _text(path))
        if not stat_module.S_ISREG(info.st_mode):
            raise PermissionError(errno.EACCES, "not a regular file", _text(path))
        # O_NONBLOCK stays set: it changes nothing for a regular file (and saves two fcntl).
        raw = io.FileIO(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    # What os.fdopen(fd, "rb") builds, less its isatty() probe (a regular file is no tty).
    return io.BufferedReader(raw, info.st_blksize if info.st_blksize > 1 else io.DEFAULT_BUFFER_SIZE)


def read_bytes(dir_fd: int, path: PathLike) -> bytes:
    """The content of the regular file ``path``."""
    with open_file(dir_fd, path) as handle:
        return handle.read()


def stat(dir_fd: int, path: PathLike, *, follow_symlinks: bool = True) -> os.stat_result:
    """``os.stat`` of ``path``; a final symlink is followed beneath only with ``follow_symlinks``."""
    if not _parts(path):
        return os.fstat(dir_fd)
    if follow_symlinks:
        fd = open_beneath(dir_fd, path, os.O_PATH)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
    parent, name = parent_of(dir_fd, path)
    with _closing(parent):
        return os.stat(name, dir_fd=parent, follow_symlinks=False)


@dataclass(frozen=True)
class Entry:
    """One directory entry: its name and ``lstat`` (symlinks are not followed)."""

    name: str
    stat: os.stat_result

    def is_dir(self) -> bool:
        return stat_module.S_ISDIR(self.stat.st_mode)

    def is_file(self) -> bool:
        return stat_module.S_ISREG(self.stat.st_mode)

    def is_symlink(self) -> bool:
        return stat_module.S_ISLNK(self.stat.st_mode)


def entries(dir_fd: int, path: PathLike = "") -> list[Entry]:
    """The entries of directory ``path`` (unsorted, without ``.``/``..``), each ``lstat``-ed
    through the directory's descriptor; an entry gone meanwhile is left out."""
    fd = open_dir(dir_fd, path)
    try:
        return _lstat_all(fd, os.listdir(fd))
    finally:
        os.close(fd)


def _lstat_all(fd: int, names: list[str]) -> list[Entry]:
    found = []
    for name in names:
        try:
            found.append(Entry(name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except FileNotFoundError:  # removed since the listing
            continue
    return found


def walk(dir_fd: int, path: PathLike = "") -> Iterator[tuple[tuple[str, ...], list[Entry]]]:
    """Top-down walk of the tree at ``path``: yields (folder parts relative to ``path``,
    its entries sorted by name). Links are never followed: a folder is entered only when
    its ``lstat`` says folder, by ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's
    descriptor, so a folder swapped for a link meanwhile is skipped, not followed. Remove
    entries from the yielded list to keep the walk out of them (like ``os.walk``).
    """
    with _closing(open_dir(dir_fd, path)) as top:
        yield from _walk_fd(top, ())


def _walk_fd(fd: int, parts: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], list[Entry]]]:
    found = _lstat_all(fd, sorted(os.listdir(fd)))
    yield parts, found
    for entry in found:
        if not entry.is_dir():
            continue
        try:
            child = os.open(entry.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:  # gone, swapped for a link or a file, unreadable: skip it
            continue
        with _closing(child):
            yield from _walk_fd(child, (*parts, entry.name))


def write_atomic(
    dir_fd: int,
    path: PathLike,
    data: bytes | Callable[[BinaryIO], object],
    *,
    make_parents: bool = False,
    mode: int | None = None,
    overwrite: bool = True,
) -> None:
    """Replace the file at ``path`` (an inside symlink is written through) atomically.

    ``data`` is the bytes, or a function that writes into the open temp file. The temp file
    is created exclusively in the parent's descriptor, fsync-ed, given the old file's mode
    (else ``mode`` or 0o644) and renamed over the name by descriptor; readers see the old or
    the new content, never half of it. On any error the temp file is removed.
    ``overwrite=False`` renames with ``RENAME_NOREPLACE``: FileExistsError when the name is
    taken by then, so "create unless it exists" has no check-then-write gap.
    """
    parent, name = locate(dir_fd, path, create=make_parents)
    with _closing(parent):
        temp, fd = _temp_in(parent, name)
        try:
            with os.fdopen(fd, "wb") as handle:
                if isinstance(data, bytes | bytearray | memoryview):
                    handle.write(data)
                else:
                    data(handle)
                handle.flush()
                os.fsync(handle.fileno())
                try:
                    old = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode & 0o7777
                except FileNotFoundError:
                    old = 0o644 if mode is None else mode
                os.fchmod(handle.fileno(), old & 0o777)
            if overwrite:
                os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            else:
                _rename_noreplace(parent, temp, parent, name)
        except BaseException:
            with suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise


def _temp_in(parent: int, name: str) -> tuple[str, int]:
    for _ in range(100):
        temp = f".{name[:40]}.{os.urandom(6).hex()}.tmp"
        try:
            return temp, os.open(
                temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=parent
            )
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def create_exclusive(
    dir_fd: int, path: PathLike, data: bytes = b"", *, mode: int = 0o644, make_parents: bool = False
) -> None:
    """Create the new file ``path`` with ``data``; FileExistsError when any entry (even a
    dangling link) has that name."""
    parent, name = parent_of(dir_fd, path, create=make_parents)
    with _closing(parent):
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def make_dirs(dir_fd: int, path: PathLike, *, exist_ok: bool = True, mode: int = 0o777) -> None:
    """Create directory ``path`` and any missing parents; FileExistsError when it exists and
    not ``exist_ok``."""
    parent, name = parent_of(dir_fd, path, create=True)
    with _closing(parent):
        try:
            os.mkdir(name, mode, dir_fd=parent)
        except FileExistsError:
            if not exist_ok:
                raise
            os.close(open_beneath(parent, name, _DIR_FLAGS))  # must be (or lead to) a folder


def unlink(dir_fd: int, path: PathLike) -> None:
    """Remove the file or symlink ``path`` (a link itself, never its target)."""
    parent, name = parent_of(dir_fd, path)
    with _closing(parent):
        os.unlink(name, dir_fd=parent)


def rmdir(dir_fd: int, path: PathLike) -> None:
    """Remove the empty directory ``path``."""
    parent, name = parent_of(dir_fd, path)
    with _closing(parent):
        os.rmdir(name, dir_fd=parent)


def remove_tree(dir_fd: int, path: PathLike) -> None:
    """Remove ``path`` and everything under it, never following a symlink."""
    parent, name = parent_of(dir_fd, path)
    with _closing(parent):
        _remove_in(parent, name)


def _remove_in(parent: int, name: str) -> None:
    if not stat_module.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
        os.unlink(name, dir_fd=parent)
        return
    with _closing(os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)) as fd:
        for child in os.listdir(fd):
            _remove_in(fd, child)
    os.rmdir(name, dir_fd=parent)


def rename(dir_fd: int, source: PathLike, target: PathLike, *, overwrite: bool = True) -> None:
    """Move ``source`` to ``target`` (both beneath ``dir_fd``), by descriptor.

    ``overwrite=False`` uses ``renameat2(RENAME_NOREPLACE)``: FileExistsError instead of a
    check-then-rename race.
    """
    src_parent, src_name = parent_of(dir_fd, source)
    with _closing(src_parent):
        dst_parent, dst_name = parent_of(dir_fd, target)
        with _closing(dst_parent):
            if overwrite:
                os.replace(src_name, dst_name, src_dir_fd=src_parent, dst_dir_fd=dst_parent)
                return
            _rename_noreplace(src_parent, src_name, dst_parent, dst_name)


def _rename_noreplace(src_parent: int, src_name: str, dst_parent: int, dst_name: str) -> None:
    result = _libc.renameat2(
        src_parent, os.fsencode(src_name), dst_parent, os.fsencode(dst_name), ctypes.c_uint(_RENAME_NOREPLACE)
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), dst_name)


def copy_file(dir_fd: int, source: PathLike, target: PathLike, *, overwrite: bool = True) -> None:
    """Copy the regular file ``source`` to ``target`` (atomically, through descriptors);
    FileExistsError when ``target`` exists and not ``overwrite``."""
    with open_file(dir_fd, source) as reader:
        if not overwrite:
            parent, name = parent_of(dir_fd, target)
            with _closing(parent), suppress(FileNotFoundError):
                os.stat(name, dir_fd=parent, follow_symlinks=False)
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), _text(target))
        mode = os.fstat(reader.fileno()).st_mode & 0o777

        def _copy(handle: BinaryIO) -> None:
            while chunk := reader.read(1 << 20):
                handle.write(chunk)

        write_atomic(dir_fd, target, _copy, mode=mode)
