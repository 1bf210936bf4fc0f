"""The one path resolver: virtual agent paths (``/Reports/q3.xlsx``) to real paths.

Every path-like tool argument of every server goes through :meth:`PathResolver.resolve`;
every id that becomes a path component goes through :func:`validate_id`. Containment is
checked on the *real* path (``os.path.realpath``), so a symlink inside the root that
points out is refused just like ``../``.

Rules, in order:
- the value must be a string without NUL bytes, at most ``MAX_PATH_CHARS`` characters,
  each component at most ``MAX_NAME_BYTES`` bytes (UTF-8);
- absolute and relative paths are both taken relative to the root (``/etc/passwd`` means
  ``<root>/etc/passwd``), ``""``, ``"."`` and ``"/"`` mean the root; a leading
  ``/filesystem/`` (how ``code_exec`` shows the root) is dropped when the root has no
  such folder;
- ``..`` may not climb above the root (refused, not clamped: the caller meant something
  else);
- the resolved real path must lie inside the real root.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from mcp_servers._core.errors import ToolError

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

    @property
    def real_root(self) -> str:
        return os.path.realpath(self.root)

    def parts(self, value: object, *, argument: str) -> list[str]:
        """Validate ``value`` and return its normalised components (may be empty = root).

        Raises ToolError ``invalid_argument`` (type, NUL, length) or ``path_outside_root``
        (``..`` above the root).
        """
        if not isinstance(value, str):
            raise ToolError(
                "invalid_argument",
                f"{argument}: expected a path string, got {type(value).__name__}",
                argument=argument,
            )
        if "\x00" in value:
            raise ToolError("invalid_argument", f"{argument}: path contains a NUL byte", argument=argument)
        if len(value) > MAX_PATH_CHARS:
            raise ToolError(
                "invalid_argument",
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
                        "path_outside_root",
                        f"{argument}: {_show(value)} climbs above the root with '..'",
                        argument=argument,
                    )
                parts.pop()
                continue
            if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise ToolError(
                    "invalid_argument",
                    f"{argument}: a path component of {_show(value)} is longer than {MAX_NAME_BYTES} bytes",
                    argument=argument,
                )
            parts.append(part)
        if parts and parts[0] == _SANDBOX_ROOT_NAME and not os.path.lexists(self.root / _SANDBOX_ROOT_NAME):
            parts = parts[1:]
        return parts

    def resolve(
        self,
        value: object,
        *,
        argument: str = "path",
        must_exist: bool = False,
        kind: Literal["file", "dir"] | None = None,
        allow_root: bool = True,
    ) -> Path:
        """The real path for virtual path ``value``, guaranteed inside the root.

        ``must_exist`` raises ``not_found`` when absent; ``kind`` additionally demands a
        regular file (``not_a_file``) or a directory (``not_a_directory``) when the path
        exists. ``allow_root=False`` refuses the root itself (for file targets).
        """
        parts = self.parts(value, argument=argument)
        if not parts and not allow_root:
            raise ToolError(
                "invalid_argument", f"{argument}: a file path is needed, got the root", argument=argument
            )
        real_root = self.real_root
        real = os.path.realpath(os.path.join(real_root, *parts))
        if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
            raise ToolError(
                "path_outside_root",
                f"{argument}: {_show(value)} resolves outside the root (through a link)",
                argument=argument,
            )
        path = Path(real)
        if must_exist and not path.exists():
            raise ToolError(
                "not_found", f"{argument}: {self.virtual_of(parts)} does not exist", argument=argument
            )
        if kind == "file" and path.exists() and not path.is_file():
            raise ToolError(
                "not_a_file", f"{argument}: {self.virtual_of(parts)} is not a file", argument=argument
            )
        if kind == "dir" and path.exists() and not path.is_dir():
            raise ToolError(
                "not_a_directory",
                f"{argument}: {self.virtual_of(parts)} is not a directory",
                argument=argument,
            )
        return path

    def virtual(self, value: object, *, argument: str = "path") -> str:
        """The normalised virtual form of ``value`` (``/a/b``), validated like resolve."""
        return self.virtual_of(self.parts(value, argument=argument))

    @staticmethod
    def virtual_of(parts: list[str]) -> str:
        return "/" + "/".join(parts)

    def to_virtual(self, real: str | Path) -> str:
        """The virtual path (``/…``) of a real path inside the root.

        Raises ToolError ``path_outside_root`` for a path outside it (a bug in the caller).
        """
        real_root = self.real_root
        absolute = os.path.abspath(real)
        for base in (real_root, str(self.root)):
            if absolute == base:
                return "/"
            if absolute.startswith(base.rstrip(os.sep) + os.sep):
                return "/" + Path(absolute).relative_to(base).as_posix()
        raise ToolError("path_outside_root", f"{_show(str(real))} is outside the root")

    def is_inside(self, real: str | Path) -> bool:
        """Whether the real path (symlinks resolved) lies inside the root."""
        resolved = os.path.realpath(real)
        real_root = self.real_root
        return resolved == real_root or resolved.startswith(real_root.rstrip(os.sep) + os.sep)


def validate_id(value: object, *, argument: str, max_length: int = MAX_ID_CHARS) -> str:
    """Check an id that becomes one path component (a chat group id, a user id, ...).

    Refuses non-strings, empty values, ``.``/``..``, ``/`` and ``\\``, NUL and other
    control characters, and values longer than ``max_length``. Spaces are allowed (Google
    Chat ids look like ``DM 8hB2jAAAAE``). Returns the value unchanged.
    """
    if not isinstance(value, str):
        raise ToolError(
            "invalid_argument",
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
        raise ToolError("invalid_argument", f"{argument}: id {_show(value)} {problem}", argument=argument)
    return value
