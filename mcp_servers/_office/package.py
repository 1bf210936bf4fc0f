"""Opening and saving Office Open XML packages (.docx, .pptx) with errors an agent can act on.

Both the documents and the presentations server go through these functions, so an
encrypted (password-protected) file, a legacy binary file, a truncated zip or a file of
the wrong type is reported the same way everywhere: one ``ToolError`` naming the file.
Writes are atomic: the package is serialised in memory first, then written with the
foundation's descriptor-based atomic write (a failed save never leaves a half-written document).
Before a library sees a package it is scanned by :func:`atoll.formats.bounds.check_package`
(real unpacked bytes, parts, XML tags, no DTD): a bomb is ``too_large``, never loaded.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from typing import Any, TypeVar

from atoll.errors import ErrorCode
from atoll.formats import bounds
from mcp_servers._core.errors import ToolError
from mcp_servers._core.world_path import WorldPath

# Compound File Binary signature: encrypted OOXML (and legacy .doc/.ppt) files start with it.
_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_MAGIC = b"PK"
#: Largest package opened (bytes); bigger files are refused with ``too_large``.
MAX_PACKAGE_BYTES = 200 * 1024 * 1024

T = TypeVar("T")


def bound_error(error: bounds.InputTooLarge, argument: str) -> ToolError:
    """A reading bound crossed (:class:`atoll.formats.bounds.InputTooLarge`) as the servers'
    error: code ``too_large``, the line naming the file and the limit, the argument."""
    return ToolError(error.code, f"{argument}: {error.message}", argument=argument)


def read_package(path: WorldPath, *, virtual: str, kind: str, argument: str, tree: bool = True) -> bytes:
    """The bytes of what must be an openable ``kind`` package (``"docx"``/``"pptx"``/...),
    read once through the root's descriptor (the libraries get these bytes, never a path),
    and scanned by :func:`atoll.formats.bounds.check_package` (``tree``: the library loads
    all its XML at once, so XML tags count).

    Raises ToolError ``not_found`` (absent), ``not_a_file`` (a folder), ``too_large`` (the
    file, or a reading bound: unpacked bytes, parts, XML tags, a DTD), ``unsupported``
    (password-protected or legacy binary file), ``bad_data`` (not a zip or a damaged one,
    a member longer than its header says), ``path_outside_root`` (a link out).
    """
    with path.open() as handle:
        info = os.fstat(handle.fileno())
        size = info.st_size
        if size > MAX_PACKAGE_BYTES:
            raise ToolError(
                ErrorCode.too_large,
                f"{argument}: {virtual} is {size} bytes (limit {MAX_PACKAGE_BYTES})",
                argument=argument,
            )
        data = handle.read()
    if data.startswith(_CFB_MAGIC):
        raise ToolError(
            ErrorCode.unsupported,
            f"{argument}: {virtual} is password-protected (encrypted) or a legacy binary Office file; "
            f"save it as an unprotected .{kind} first",
            argument=argument,
        )
    if not data.startswith(_ZIP_MAGIC) or not zipfile.is_zipfile(io.BytesIO(data)):
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a valid .{kind} file (not a zip package)",
            argument=argument,
        )
    try:
        # A version that passed is not scanned again; ctime is in its key because a writer
        # can set mtime back (utime), never ctime.
        version = (
            "package",
            path.lock_key,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            info.st_ctime_ns,
            tree,
        )
        bounds.check_package(data, virtual, tree=tree, key=version)
    except bounds.InputTooLarge as exc:
        raise bound_error(exc, argument) from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a valid .{kind} file (damaged zip: {exc})",
            argument=argument,
        ) from None
    return data


def open_package(
    path: WorldPath,
    loader: Callable[[Any], T],
    *,
    virtual: str,
    kind: str,
    argument: str,
    tree: bool = True,
) -> T:
    """Load ``path`` with ``loader`` (``docx.Document`` / ``pptx.Presentation``) from its bytes.

    Raises the errors of :func:`read_package`, and ``bad_data`` when the library cannot
    parse the package (missing main part, broken XML, wrong content type).
    """
    data = read_package(path, virtual=virtual, kind=kind, argument=argument, tree=tree)
    try:
        return loader(io.BytesIO(data))
    except ToolError:
        raise
    except bounds.InputTooLarge as exc:  # a loader's own cap (slides): it names no file
        raise ToolError(exc.code, f"{argument}: {virtual} {exc.message}", argument=argument) from None
    except Exception as exc:  # python-docx/pptx raise many types for broken packages
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a valid .{kind} file ({reason})",
            argument=argument,
        ) from exc


def save_package(package: Any, path: WorldPath) -> int:
    """Atomically write ``package`` (anything with ``save(stream)``) to ``path``; returns bytes.

    The package is serialised in memory first, so a failure never touches the file; the
    bytes go to a temp file in the parent's descriptor, renamed over the name by descriptor.
    """
    buffer = io.BytesIO()
    package.save(buffer)
    data = buffer.getvalue()
    path.write_atomic(data, make_parents=True)
    return len(data)


def require_suffix(virtual: str, suffixes: tuple[str, ...], *, argument: str) -> None:
    """Refuse a path whose extension is not one of ``suffixes`` (``unsupported``)."""
    if not virtual.lower().endswith(suffixes):
        wanted = " or ".join(suffixes)
        raise ToolError(
            ErrorCode.unsupported, f"{argument}: {virtual} is not a {wanted} file", argument=argument
        )
