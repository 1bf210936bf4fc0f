"""The presentations server's state: path resolution, opening and atomic saving of .pptx files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers._core.store import file_lock
from mcp_servers._office.package import open_package, require_suffix, save_package

PPTX_SUFFIXES = (".pptx",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff")
SHEET_SUFFIXES = (".xlsx", ".xlsm")


def _load(stream: Any) -> Any:
    from pptx import Presentation

    return Presentation(stream)


class DeckFiles:
    """Resolves agent paths under the filesystem root and opens/saves decks there."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def locate(
        self, value: object, *, argument: str = "file_path", must_exist: bool = True
    ) -> tuple[Path, str]:
        """(real path, virtual path) of a .pptx argument; ToolError when outside the root,
        absent (with ``must_exist``) or not a .pptx name."""
        path = self.ctx.files.resolve(
            value, argument=argument, must_exist=must_exist, kind="file", allow_root=False
        )
        virtual = self.ctx.files.to_virtual(path)
        require_suffix(virtual, PPTX_SUFFIXES, argument=argument)
        return path, virtual

    def existing(
        self, value: object, argument: str, suffixes: tuple[str, ...], what: str
    ) -> tuple[Path, str]:
        """An existing file inside the root with one of ``suffixes`` (an image, a workbook)."""
        path = self.ctx.files.resolve(
            value, argument=argument, must_exist=True, kind="file", allow_root=False
        )
        virtual = self.ctx.files.to_virtual(path)
        if not virtual.lower().endswith(suffixes):
            raise ToolError(
                "unsupported",
                f"{argument}: {virtual} is not {what} ({', '.join(suffixes)})",
                argument=argument,
            )
        return path, virtual

    def image(self, value: object, argument: str = "image_path") -> Path:
        return self.existing(value, argument, IMAGE_SUFFIXES, "an image")[0]

    def open(self, value: object, *, argument: str = "file_path") -> tuple[Any, str]:
        """(python-pptx Presentation, virtual path) for reading."""
        path, virtual = self.locate(value, argument=argument)
        return open_package(path, _load, virtual=virtual, kind="pptx", argument=argument), virtual

    @contextmanager
    def edit(self, value: object, *, argument: str = "file_path") -> Iterator[tuple[Any, str]]:
        """Open a deck for a read-modify-write cycle; saved atomically if the block finishes
        without error, left untouched otherwise (so multi-operation edits are all or nothing)."""
        path, virtual = self.locate(value, argument=argument)
        with file_lock(path):
            deck = open_package(path, _load, virtual=virtual, kind="pptx", argument=argument)
            yield deck, virtual
            save_package(deck, path)
