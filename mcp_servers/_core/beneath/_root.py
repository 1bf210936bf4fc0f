"""One root folder's operations, the root opened by its trusted path per call."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mcp_servers._core.beneath import _ops
from mcp_servers._core.beneath._resolve import (
    _DIR_FLAGS,
    PathLike,
    _anchor,
    _closing,
    anchor_names,
    open_beneath,
    open_dir,
)


class Root:
    """The operations above on one root folder, opened afresh (by its trusted path) per call.

    ``Root(path).read_bytes("a/b.txt")`` is ``read_bytes(<fd of path>, "a/b.txt")``.
    :meth:`fd` yields the root's descriptor for callers that chain several operations.
    The root is opened by its path at every call, never kept open: a root made, removed or
    replaced meanwhile (populate creates it; a test replaces it) is the one the call sees.
    """

    __slots__ = ("_anchor_value", "_open_path", "anchors", "path")

    def __init__(self, path: str | os.PathLike[str], *, aliases: Sequence[str] = ()) -> None:
        self.path = Path(path).absolute()
        self._open_path = str(self.path)
        # Absolute link targets that mean the root itself (see beneath.anchored).
        self.anchors = (self._open_path, os.path.realpath(self.path), *aliases)
        self._anchor_value = anchor_names(self.anchors)

    @contextmanager
    def fd(self) -> Iterator[int]:
        """The root's descriptor (FileNotFoundError when the root does not exist); links
        to the root's own absolute path are followed inside it while the block runs."""
        fd = os.open(self._open_path, _DIR_FLAGS)
        token = _anchor.set((fd, self._anchor_value))  # what anchored(fd, self.anchors) sets
        try:
            yield fd
        finally:
            _anchor.reset(token)
            os.close(fd)

    def _call(self, function: Callable, *args: object, **kwargs: object):
        # fd() without its context manager: this runs once per file operation.
        fd = os.open(self._open_path, _DIR_FLAGS)
        token = _anchor.set((fd, self._anchor_value))
        try:
            return function(fd, *args, **kwargs)
        finally:
            _anchor.reset(token)
            os.close(fd)

    def open(self, path: PathLike, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        return self._call(open_beneath, path, flags, mode)

    def open_dir(self, path: PathLike = "", *, create: bool = False) -> int:
        return self._call(open_dir, path, create=create)

    def open_file(self, path: PathLike) -> BinaryIO:
        return self._call(_ops.open_file, path)

    def read_bytes(self, path: PathLike) -> bytes:
        return self._call(_ops.read_bytes, path)

    def stat(self, path: PathLike, *, follow_symlinks: bool = True) -> os.stat_result:
        return self._call(_ops.stat, path, follow_symlinks=follow_symlinks)

    def entries(self, path: PathLike = "") -> list[_ops.Entry]:
        return self._call(_ops.entries, path)

    def walk(self, path: PathLike = "") -> Iterator[tuple[tuple[str, ...], list[_ops.Entry]]]:
        # Only the top is resolved (links followed, anchored); the walk itself never follows
        # a link, so no anchor stays set in the caller's context between yields.
        top = self._call(open_dir, path)
        with _closing(top):
            yield from _ops.walk(top)

    def write_atomic(
        self, path: PathLike, data: bytes | Callable[[BinaryIO], object], **kwargs: object
    ) -> None:
        self._call(_ops.write_atomic, path, data, **kwargs)

    def create_exclusive(self, path: PathLike, data: bytes = b"", **kwargs: object) -> None:
        self._call(_ops.create_exclusive, path, data, **kwargs)

    def make_dirs(self, path: PathLike, *, exist_ok: bool = True) -> None:
        self._call(_ops.make_dirs, path, exist_ok=exist_ok)

    def unlink(self, path: PathLike) -> None:
        self._call(_ops.unlink, path)

    def rmdir(self, path: PathLike) -> None:
        self._call(_ops.rmdir, path)

    def remove_tree(self, path: PathLike) -> None:
        self._call(_ops.remove_tree, path)

    def rename(self, source: PathLike, target: PathLike, *, overwrite: bool = True) -> None:
        self._call(_ops.rename, source, target, overwrite=overwrite)

    def copy_file(self, source: PathLike, target: PathLike, *, overwrite: bool = True) -> None:
        self._call(_ops.copy_file, source, target, overwrite=overwrite)
