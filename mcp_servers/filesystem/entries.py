"""Describing directory entries: type, size, time, in a stable sorted order."""

from __future__ import annotations

import functools
import stat
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel

from mcp_servers._core import ToolError, WorldPath, beneath

EntryType = Literal["file", "directory", "symlink", "other"]


class Entry(BaseModel):
    """One file or folder as the agent sees it."""

    name: str
    path: str
    type: EntryType
    size: int | None = None
    modified: str | None = None
    note: str | None = None


@functools.lru_cache(maxsize=4096)
def iso_time(timestamp: float) -> str:
    # Memoised: listings show the same few modification times again and again.
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def describe(directory: WorldPath, found: beneath.Entry, virtual: str) -> Entry:
    """An entry for ``found`` in ``directory``: a link is followed only beneath the root."""
    name = found.name
    info = found.stat
    note = None
    if stat.S_ISLNK(info.st_mode):
        try:
            info = directory.child(name).stat()
        except ToolError as exc:
            note = "link pointing outside the root" if exc.code == "path_outside_root" else "broken link"
            return Entry(name=name, path=virtual, type="symlink", note=note)
        note = "link"
    if stat.S_ISDIR(info.st_mode):
        kind: EntryType = "directory"
        size = None
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
        size = info.st_size
    else:
        kind, size = "other", None
    return Entry(name=name, path=virtual, type=kind, size=size, modified=iso_time(info.st_mtime), note=note)


def sort_key(entry: Entry) -> tuple[int, str, str]:
    """Folders first, then files; case-insensitive by name, ties broken by exact name."""
    return (0 if entry.type == "directory" else 1, entry.name.casefold(), entry.name)


def child_virtual(parent_virtual: str, name: str) -> str:
    return parent_virtual.rstrip("/") + "/" + name


def scan(directory: WorldPath, virtual: str) -> list[Entry]:
    """The sorted entries of a folder, listed through its descriptor: ToolError when unreadable,
    ``not_found`` when absent, ``not_a_directory`` when it is a file (so a caller needs no
    ``require("dir")`` first, and the folder is opened once)."""
    entries = [
        describe(directory, found, child_virtual(virtual, found.name)) for found in directory.entries()
    ]
    entries.sort(key=sort_key)
    return entries
