"""An agent's path after the resolver's checks: every use opens it beneath the root.

:meth:`PathResolver.at` validates the text of a path argument and returns a
:class:`WorldPath`; a tool never gets a host path string to open. Each operation here
opens the root by its trusted path and the agent's path beneath that descriptor
(:mod:`mcp_servers._core.beneath`), then maps the operating system's answer to the one
error style of the servers (``not_found``, ``not_a_file``, ``path_outside_root``, …),
naming the argument and the virtual path, never a host path.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import BinaryIO, Literal

from atoll.errors import ErrorCode
from mcp_servers._core import beneath
from mcp_servers._core.errors import ToolError

Kind = Literal["file", "dir"]


def _show(value: str, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


class WorldPath:
    """A validated path under one root (``parts`` are plain names, no ``.``/``..``).

    Cheap to make; nothing is opened until an operation runs. ``argument`` names the tool
    argument in error messages.
    """

    __slots__ = ("argument", "parts", "root")

    def __init__(self, root: beneath.Root, parts: tuple[str, ...], argument: str) -> None:
        self.root = root
        self.parts = parts
        self.argument = argument

    # --- names -------------------------------------------------------------------------

    @property
    def virtual(self) -> str:
        """The path as the agent sees it: ``/a/b.txt`` (``/`` for the root)."""
        return "/" + "/".join(self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def suffix(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    @property
    def is_root(self) -> bool:
        return not self.parts

    @property
    def parent(self) -> WorldPath:
        return WorldPath(self.root, self.parts[:-1], self.argument)

    def child(self, name: str, argument: str | None = None) -> WorldPath:
        """The entry ``name`` (one plain component) inside this folder."""
        if not name or "/" in name or name in (".", ".."):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument or self.argument}: {_show(name)} must be a plain file name",
                argument=argument or self.argument,
            )
        return WorldPath(self.root, (*self.parts, name), argument or self.argument)

    @property
    def lock_key(self) -> str:
        """The lexical host spelling of this path: a name for :func:`file_lock` and caches,
        never a path to open."""
        return os.path.join(self.root.path, *self.parts)

    def __repr__(self) -> str:
        return f"WorldPath({self.virtual!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorldPath) and (other.root.path, other.parts) == (self.root.path, self.parts)

    def __hash__(self) -> int:
        return hash((self.root.path, self.parts))

    # --- errors ------------------------------------------------------------------------

    def _error(self, exc: OSError) -> ToolError:
        where = f"{self.argument}: {self.virtual}"
        if isinstance(exc, beneath.OutsideRoot):
            return ToolError(
                ErrorCode.path_outside_root,
                f"{self.argument}: {_show(self.virtual)} resolves outside the root (through a link)",
                argument=self.argument,
            )
        if isinstance(exc, FileNotFoundError):
            return ToolError(ErrorCode.not_found, f"{where} does not exist", argument=self.argument)
        if isinstance(exc, FileExistsError):
            return ToolError(ErrorCode.already_exists, f"{where} already exists", argument=self.argument)
        if isinstance(exc, IsADirectoryError):
            return ToolError(ErrorCode.not_a_file, f"{where} is not a file", argument=self.argument)
        if isinstance(exc, NotADirectoryError):
            return ToolError(ErrorCode.not_a_directory, f"{where} is not a directory", argument=self.argument)
        if exc.errno == errno.ELOOP:
            return ToolError(
                ErrorCode.invalid_argument, f"{where} goes through too many links", argument=self.argument
            )
        if exc.errno == errno.ENOTEMPTY:
            return ToolError(
                ErrorCode.conflict, f"{where} is a folder that is not empty", argument=self.argument
            )
        if isinstance(exc, PermissionError) and exc.strerror == "not a regular file":
            return ToolError(ErrorCode.not_a_file, f"{where} is not a regular file", argument=self.argument)
        return ToolError(
            ErrorCode.permission_denied, f"{where}: {exc.strerror or exc}", argument=self.argument
        )

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Map an OSError raised in the block to this path's ToolError."""
        try:
            yield
        except OSError as exc:
            raise self._error(exc) from None

    def _call(self, function: Callable, *args: object, **kwargs: object):
        try:
            return function(*args, **kwargs)
        except OSError as exc:
            raise self._error(exc) from None

    # --- looking -----------------------------------------------------------------------

    def stat(self) -> os.stat_result:
        """``stat`` (an inside link followed); ToolError ``not_found`` when absent."""
        return self._call(self.root.stat, self.parts)

    def lstat(self) -> os.stat_result:
        """``lstat``: a final link is described, not followed."""
        return self._call(self.root.stat, self.parts, follow_symlinks=False)

    def kind(self) -> Literal["file", "dir", "other"] | None:
        """What is there now (an inside link followed); None when absent."""
        try:
            mode = self.stat().st_mode
        except ToolError as exc:
            if exc.code == "not_found":
                return None
            raise
        return "dir" if stat_module.S_ISDIR(mode) else "file" if stat_module.S_ISREG(mode) else "other"

    def exists(self) -> bool:
        return self.kind() is not None

    def require(self, kind: Kind | None = None, *, must_exist: bool = True) -> WorldPath:
        """Check that the path exists (``must_exist``) and is of ``kind`` when it exists.

        Raises ToolError ``not_found``, ``not_a_file`` or ``not_a_directory``, and
        ``path_outside_root`` for a link out. Returns self. A check, not a guarantee: the
        operations themselves open by descriptor and fail the same way if things changed.
        """
        found = self.kind()
        if found is None:
            if must_exist:
                raise ToolError(
                    ErrorCode.not_found,
                    f"{self.argument}: {self.virtual} does not exist",
                    argument=self.argument,
                )
            return self
        if kind == "file" and found != "file":
            raise ToolError(
                ErrorCode.not_a_file, f"{self.argument}: {self.virtual} is not a file", argument=self.argument
            )
        if kind == "dir" and found != "dir":
            raise ToolError(
                ErrorCode.not_a_directory,
                f"{self.argument}: {self.virtual} is not a directory",
                argument=self.argument,
            )
        return self

    def entries(self) -> list[beneath.Entry]:
        """The folder's entries (``lstat``-ed, unsorted)."""
        return self._call(self.root.entries, self.parts)

    def walk(self) -> Generator[tuple[tuple[str, ...], list[beneath.Entry]]]:
        """Top-down walk below this folder, never following links (:func:`beneath.walk`)."""
        try:
            yield from self.root.walk(self.parts)
        except OSError as exc:
            raise self._error(exc) from None

    @contextmanager
    def open_dir(self) -> Iterator[int]:
        """A descriptor of this folder, for walks that continue by ``dir_fd``."""
        fd = self._call(self.root.open_dir, self.parts)
        try:
            yield fd
        finally:
            os.close(fd)

    # --- reading -----------------------------------------------------------------------

    def open(self) -> BinaryIO:
        """A binary read-only file object of this regular file (use it in a ``with``)."""
        return self._call(self.root.open_file, self.parts)

    def read_bytes(self, limit: int | None = None) -> bytes:
        """The file's content; ToolError ``too_large`` when it has more than ``limit`` bytes."""
        with self.open() as handle:
            if limit is not None and os.fstat(handle.fileno()).st_size > limit:
                raise ToolError(
                    ErrorCode.too_large,
                    f"{self.argument}: {self.virtual} is larger than {limit} bytes",
                    argument=self.argument,
                )
            return self._call(handle.read)

    # --- writing -----------------------------------------------------------------------

    def write_atomic(
        self,
        data: bytes | Callable[[BinaryIO], object],
        *,
        make_parents: bool = False,
        overwrite: bool = True,
    ) -> None:
        """Replace (or create) the file atomically through the parent's descriptor;
        ``overwrite=False``: ToolError ``already_exists`` when the name is taken."""
        self._call(self.root.write_atomic, self.parts, data, make_parents=make_parents, overwrite=overwrite)

    def create(self, data: bytes = b"", *, make_parents: bool = False) -> None:
        """Create the file exclusively; ToolError ``already_exists`` when the name is taken."""
        self._call(self.root.create_exclusive, self.parts, data, make_parents=make_parents)

    def mkdir(self, *, parents: bool = True, exist_ok: bool = True) -> None:
        if parents:
            self._call(self.root.make_dirs, self.parts, exist_ok=exist_ok)
        else:
            self._call(self._mkdir_one, exist_ok)

    def _mkdir_one(self, exist_ok: bool) -> None:
        with self.root.fd() as fd:
            parent, name = beneath.parent_of(fd, self.parts)
            try:
                os.mkdir(name, dir_fd=parent)
            except FileExistsError:
                if not exist_ok:
                    raise
            finally:
                os.close(parent)

    def unlink(self) -> None:
        self._call(self.root.unlink, self.parts)

    def rmdir(self) -> None:
        self._call(self.root.rmdir, self.parts)

    def remove_tree(self) -> None:
        self._call(self.root.remove_tree, self.parts)

    def rename(self, target: WorldPath, *, overwrite: bool = True) -> None:
        """Move this entry to ``target`` (same root), by descriptor."""
        try:
            self.root.rename(self.parts, target.parts, overwrite=overwrite)
        except FileExistsError as exc:
            raise target._error(exc) from None
        except OSError as exc:
            raise self._error(exc) from None

    def copy_to(self, target: WorldPath, *, overwrite: bool = True) -> None:
        """Copy this regular file to ``target`` (atomically, through descriptors)."""
        try:
            self.root.copy_file(self.parts, target.parts, overwrite=overwrite)
        except FileExistsError as exc:
            raise target._error(exc) from None
        except OSError as exc:
            raise self._error(exc) from None
