"""The documents server's state: path resolution, opening and atomic saving of .docx files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers._core.store import file_lock
from mcp_servers._office.package import open_package, require_suffix, save_package

DOCX_SUFFIXES = (".docx",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff")


def _load(stream: Any) -> Any:
    import docx

    return docx.Document(stream)


class DocumentFiles:
    """Resolves agent paths under the filesystem root and opens/saves documents there."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def locate(
        self, value: object, *, argument: str = "file_path", must_exist: bool = True
    ) -> tuple[Path, str]:
        """(real path, virtual path) of a .docx argument; ToolError when outside the root,
        absent (with ``must_exist``) or not a .docx name."""
        path = self.ctx.files.resolve(
            value, argument=argument, must_exist=must_exist, kind="file", allow_root=False
        )
        virtual = self.ctx.files.to_virtual(path)
        require_suffix(virtual, DOCX_SUFFIXES, argument=argument)
        return path, virtual

    def image(self, value: object, argument: str) -> Path:
        """An existing image file inside the root."""
        path = self.ctx.files.resolve(
            value, argument=argument, must_exist=True, kind="file", allow_root=False
        )
        virtual = self.ctx.files.to_virtual(path)
        if not virtual.lower().endswith(IMAGE_SUFFIXES):
            raise ToolError(
                "unsupported",
                f"{argument}: {virtual} is not an image ({', '.join(IMAGE_SUFFIXES)})",
                argument=argument,
            )
        return path

    def open(self, value: object, *, argument: str = "file_path") -> tuple[Any, str]:
        """(python-docx Document, virtual path) for reading."""
        path, virtual = self.locate(value, argument=argument)
        return open_package(path, _load, virtual=virtual, kind="docx", argument=argument), virtual

    @contextmanager
    def edit(self, value: object, *, argument: str = "file_path") -> Iterator[tuple[Any, str]]:
        """Open a document for a read-modify-write cycle; saved atomically if the block
        finishes without error, left untouched otherwise."""
        path, virtual = self.locate(value, argument=argument)
        with file_lock(path):
            document = open_package(path, _load, virtual=virtual, kind="docx", argument=argument)
            yield document, virtual
            save_package(document, path)
