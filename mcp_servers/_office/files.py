"""A server's Office files: path resolution under the root, opening and atomic saving.

The documents and presentations servers each subclass :class:`OfficeFiles` once, naming
their package kind and how to load one; everything else (which paths are accepted, the
errors, the read-modify-write cycle) is the same for both.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from atoll.errors import ErrorCode
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers._core.store import file_lock
from mcp_servers._core.world_path import WorldPath
from mcp_servers._office.package import open_package, require_suffix, save_package

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff")


class OfficeFiles:
    """Resolves agent paths under the filesystem root and opens/saves packages there.

    Subclasses set ``kind`` (``"docx"``/``"pptx"``, used in error messages), ``suffixes``
    (the accepted file name endings) and implement :meth:`load`.
    """

    kind: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]]

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    @staticmethod
    def load(stream: Any) -> Any:
        """The library object (``docx.Document``, ``pptx.Presentation``) read from ``stream``."""
        raise NotImplementedError

    def locate(
        self, value: object, *, argument: str = "file_path", must_exist: bool = True
    ) -> tuple[WorldPath, str]:
        """(checked path, virtual path) of a package argument; ToolError when outside the
        root, absent (with ``must_exist``), not a file or not named with one of ``suffixes``."""
        path = self.ctx.files.at(value, argument=argument, allow_root=False).require(
            "file", must_exist=must_exist
        )
        require_suffix(path.virtual, self.suffixes, argument=argument)
        return path, path.virtual

    def new_file(self, directory: object, file_name: str, *, overwrite: bool) -> tuple[WorldPath, str]:
        """(checked path, virtual path) for a new package called ``file_name`` in ``directory``.

        Raises ToolError ``invalid_argument`` (an empty name or one with a folder in it),
        ``unsupported`` (not named with one of ``suffixes``), the folder's path errors, and
        ``already_exists`` when the file exists and ``overwrite`` is false.
        """
        if "/" in file_name or "\\" in file_name or not file_name.strip():
            raise ToolError(
                ErrorCode.invalid_argument,
                f"file_name: {file_name!r} must be a plain file name",
                argument="file_name",
            )
        require_suffix(file_name, self.suffixes, argument="file_name")
        folder = self.ctx.files.at(directory, argument="directory").require("dir", must_exist=False)
        target = folder.child(file_name, "file_name").virtual
        path, virtual = self.locate(target, argument="file_name", must_exist=False)
        if path.exists() and not overwrite:
            raise ToolError(
                ErrorCode.already_exists,
                f"file_name: {virtual} already exists (pass overwrite=true)",
                argument="file_name",
            )
        return path, virtual

    def existing(
        self, value: object, argument: str, suffixes: tuple[str, ...], what: str
    ) -> tuple[WorldPath, str]:
        """An existing file inside the root with one of ``suffixes`` (an image, a workbook);
        ToolError ``unsupported`` names ``what`` was expected."""
        path = self.ctx.files.at(value, argument=argument, allow_root=False).require("file")
        virtual = path.virtual
        if not virtual.lower().endswith(suffixes):
            raise ToolError(
                ErrorCode.unsupported,
                f"{argument}: {virtual} is not {what} ({', '.join(suffixes)})",
                argument=argument,
            )
        return path, virtual

    def image(self, value: object, argument: str = "image_path") -> io.BytesIO:
        """The bytes of an existing image file inside the root, as a stream for python-docx
        and python-pptx (read through the root's descriptor; they never see a path)."""
        return io.BytesIO(self.existing(value, argument, IMAGE_SUFFIXES, "an image")[0].read_bytes())

    def open(self, value: object, *, argument: str = "file_path") -> tuple[Any, str]:
        """(loaded package, virtual path) for reading."""
        path, virtual = self.locate(value, argument=argument)
        return open_package(path, self.load, virtual=virtual, kind=self.kind, argument=argument), virtual

    @contextmanager
    def edit(self, value: object, *, argument: str = "file_path") -> Iterator[tuple[Any, str]]:
        """Open a package for a read-modify-write cycle; saved atomically if the block
        finishes without error, left untouched otherwise (so multi-operation edits are all
        or nothing)."""
        path, virtual = self.locate(value, argument=argument)
        with file_lock(path.lock_key):
            package = open_package(path, self.load, virtual=virtual, kind=self.kind, argument=argument)
            yield package, virtual
            save_package(package, path)
