"""The one path resolver: virtual agent paths (``/Reports/q3.xlsx``) to checked paths.

Every path-like tool argument of every server goes through :meth:`PathResolver.at`,
which checks the text and returns a :class:`WorldPath`; every id that becomes a path
component goes through :func:`validate_id`. Nothing here returns a host path to open:
each operation of a WorldPath opens it beneath the root's descriptor
(:mod:`mcp_servers._core.beneath`), so a symlink that points out is refused just like
``../``, at the moment of the open (no check-then-open race).

Rules, in order:
- the value must be a string without NUL bytes, at most ``MAX_PATH_CHARS`` characters,
  each component at most ``MAX_NAME_BYTES`` bytes (UTF-8);
- absolute and relative paths are both taken relative to the root (``/etc/passwd`` means
  ``<root>/etc/passwd``), ``""``, ``"."`` and ``"/"`` mean the root; a leading
  ``/filesystem/`` (how ``code_exec`` shows the root) is dropped when the root has no
  such folder;
- ``..`` may not climb above the root (refused, not clamped: the caller meant something
  else);
- links are followed only while they stay beneath the root (checked by the kernel, or
  by a walk of ``O_NOFOLLOW`` opens, at each operation).
"""

from __future__ import annotations

import os
from pathlib import Path

from atoll.errors import ErrorCode
from mcp_servers._core.beneath import Root
from mcp_servers._core.errors import ToolError
from mcp_servers._core.world_path import WorldPath

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_ID_CHARS = 255
# How code_exec shows the root to programs; agents copy such paths into tool calls.
_SANDBOX_ROOT_NAME = "filesystem"


def _show(value: str, limit: int = 80) -> str:
    """A short, safe rendering of an untrusted value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


class PathResolver:
    """Maps virtual paths under one root to real paths and back.

    The root need not exist when the resolver is made (a world may be populated later).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        # code_exec shows the root as /filesystem: its absolute links spell it that way.
        self._tree = Root(self.root, aliases=("/" + _SANDBOX_ROOT_NAME,))

    def parts(self, value: object, *, argument: str) -> list[str]:
        """Validate ``value`` and return its normalised components (may be empty = root).

        Raises ToolError ``invalid_argument`` (type, NUL, length) or ``path_outside_root``
        (``..`` above the root).
        """
        if not isinstance(value, str):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument}: expected a path string, got {type(value).__name__}",
                argument=argument,
            )
        if "\x00" in value:
            raise ToolError(
                ErrorCode.invalid_argument, f"{argument}: path contains a NUL byte", argument=argument
            )
        if len(value) > MAX_PATH_CHARS:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument}: path is {len(value)} characters long (limit {MAX_PATH_CHARS})",
                argument=argument,
            )
        parts: list[str] = []
        for part in value.strip().split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise ToolError(
                        ErrorCode.path_outside_root,
                        f"{argument}: {_show(value)} climbs above the root with '..'",
                        argument=argument,
                    )
                parts.pop()
                continue
            if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"{argument}: a path component of {_show(value)} is longer than {MAX_NAME_BYTES} bytes",
                    argument=argument,
                )
            parts.append(part)
        if parts and parts[0] == _SANDBOX_ROOT_NAME and not os.path.lexists(self.root / _SANDBOX_ROOT_NAME):
            parts = parts[1:]
        return parts

    def at(self, value: object, *, argument: str = "path", allow_root: bool = True) -> WorldPath:
        """The checked :class:`WorldPath` for virtual path ``value``.

        Raises ToolError ``invalid_argument`` (type, NUL, length; the root when
        ``allow_root`` is false) or ``path_outside_root`` (``..`` above the root). Links
        are resolved later, by every operation, beneath the root's descriptor.
        """
        parts = self.parts(value, argument=argument)
        if not parts and not allow_root:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument}: a file path is needed, got the root",
                argument=argument,
            )
        return WorldPath(self.tree, tuple(parts), argument)

    @property
    def tree(self) -> Root:
        """The root, for descriptor-based operations (:mod:`mcp_servers._core.beneath`)."""
        return self._tree

    def virtual(self, value: object, *, argument: str = "path") -> str:
        """The normalised virtual form of ``value`` (``/a/b``), validated like resolve."""
        return self.virtual_of(self.parts(value, argument=argument))

    @staticmethod
    def virtual_of(parts: list[str]) -> str:
        return "/" + "/".join(parts)


def validate_id(value: object, *, argument: str, max_length: int = MAX_ID_CHARS) -> str:
    """Check an id that becomes one path component (a chat group id, a user id, ...).

    Refuses non-strings, empty values, ``.``/``..``, ``/`` and ``\\``, NUL and other
    control characters, and values longer than ``max_length``. Spaces are allowed (Google
    Chat ids look like ``DM 8hB2jAAAAE``). Returns the value unchanged.
    """
    if not isinstance(value, str):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: expected a string id, got {type(value).__name__}",
            argument=argument,
        )
    problem = None
    if not value.strip():
        problem = "is empty"
    elif len(value) > max_length:
        problem = f"is {len(value)} characters long (limit {max_length})"
    elif value in (".", "..") or value.strip() in (".", ".."):
        problem = "is not a valid id"
    elif "/" in value or "\\" in value:
        problem = "may not contain '/' or '\\'"
    elif any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        problem = "contains a control character"
    if problem:
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: id {_show(value)} {problem}", argument=argument
        )
    return value
