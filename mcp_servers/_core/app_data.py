"""App data (mail, calendar, chat): every file opened beneath the app-data root's descriptor.

The app servers name their files by host paths (``<apps_data>/mail/Inbox.mbox``): they
are cache keys, lock names and what problems are reported against. Those paths are never
opened as strings. :class:`AppData` maps one to its place relative to the app-data root
(lexically: the names came from our own walk or from validated ids) and opens it beneath
the root's descriptor (:mod:`mcp_servers._core.beneath`), so a folder or file of the app
data that is a link out of it (``.apps_data/mail -> /var/mail``) is never followed, and a
swap of a folder for such a link between two calls changes nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath
from typing import BinaryIO

from mcp_servers._core import beneath
from mcp_servers._core.store import FileStamp

# Answers that mean "not there (for us)": absent, a file on the way, a link out.
_ABSENT = (FileNotFoundError, NotADirectoryError, beneath.OutsideRoot)


class AppData:
    """One app's folder (``<apps_data_root>/<name>``), opened by descriptor beneath the root."""

    def __init__(self, apps_data_root: str | os.PathLike[str], name: str) -> None:
        self.tree = beneath.Root(apps_data_root)
        self.root = Path(self.tree.path)
        self.folder = self.root / name

    def relative(self, path: str | PurePath) -> str:
        """Where ``path`` lies below the app-data root, lexically; OutsideRoot when it does
        not (a bug in the caller: our paths are all built under the root)."""
        try:
            return PurePath(path).relative_to(self.root).as_posix()
        except ValueError:
            raise beneath.OutsideRoot(str(path)) from None

    # --- looking -----------------------------------------------------------------------

    def stamp(self, path: str | PurePath) -> FileStamp | None:
        """The version of the regular file at ``path`` (inside links followed), or None
        when it is absent, not a regular file, or leads out of the app data."""
        try:
            info = self.tree.stat(self.relative(path))
        except _ABSENT:
            return None
        return FileStamp.from_stat(info) if _is_regular(info) else None

    def is_file(self, path: str | PurePath) -> bool:
        return self.stamp(path) is not None

    def is_dir(self, path: str | PurePath) -> bool:
        try:
            return stat.S_ISDIR(self.tree.stat(self.relative(path)).st_mode)
        except _ABSENT:
            return False

    def contains(self, path: str | PurePath) -> bool:
        """Whether ``path`` resolves inside the app data (through the descriptor); an absent
        file counts as inside when its folder is (a dangling link out is still refused when
        the file is written, by the write itself)."""
        rel = self.relative(path)
        try:
            self.tree.stat(rel)
            return True
        except beneath.OutsideRoot:
            return False
        except (FileNotFoundError, NotADirectoryError):
            pass
        try:
            return stat.S_ISDIR(self.tree.stat(rel.rpartition("/")[0]).st_mode)
        except _ABSENT:
            return False

    def entries(self, folder: str | PurePath) -> list[beneath.Entry]:
        """The entries of a folder (empty when absent or leading out)."""
        try:
            return self.tree.entries(self.relative(folder))
        except _ABSENT:
            return []

    def files(self, suffix: str, *, skip_hidden: bool = False) -> list[tuple[Path, FileStamp]]:
        """Every regular file named ``*<suffix>`` (case-insensitive) below the app's folder,
        sorted by its path there, with its stamp from the walk; links to regular files
        inside the app data are included, links out and links to folders are not. Empty
        when the folder is absent or is itself a link out."""
        found: list[tuple[Path, FileStamp]] = []
        try:
            with self.tree.fd() as fd:
                top = self.relative(self.folder)
                for parts, listed in beneath.walk(fd, top):
                    for entry in listed:
                        name = entry.name
                        if not name.lower().endswith(suffix) or (skip_hidden and name.startswith(".")):
                            continue
                        info = entry.stat
                        rel = "/".join((top, *parts, name))
                        if entry.is_symlink():
                            try:
                                info = beneath.stat(fd, rel)
                            except (*_ABSENT, OSError):
                                continue
                        if _is_regular(info):
                            found.append((self.root / rel, FileStamp.from_stat(info)))
        except _ABSENT:
            return []
        return sorted(found, key=lambda item: item[0].relative_to(self.folder).as_posix())

    # --- reading and writing -----------------------------------------------------------

    def open(self, path: str | PurePath) -> BinaryIO:
        """The regular file at ``path``, read-only (FileNotFoundError, OutsideRoot, …)."""
        return self.tree.open_file(self.relative(path))

    def read_bytes(self, path: str | PurePath) -> bytes:
        return self.tree.read_bytes(self.relative(path))

    def write_atomic(self, path: str | PurePath, data: bytes) -> None:
        """Replace the file atomically (temp file in the parent's descriptor, then rename)."""
        self.tree.write_atomic(self.relative(path), data, make_parents=True)

    def open_append(self, path: str | PurePath) -> BinaryIO:
        """The file opened for reading and appending (created, with its folders, if missing)."""
        rel = self.relative(path)
        parent = rel.rpartition("/")[0]
        if parent:
            self.tree.make_dirs(parent)
        fd = self.tree.open(rel, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        if not _is_regular(os.fstat(fd)):
            os.close(fd)
            raise PermissionError(f"{rel} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab+")


def _is_regular(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode)
