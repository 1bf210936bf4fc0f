"""The names of members of world archives (zip and tar): one set of rules for every reader.

The benchmark loader, the environment's populate and the grader's snapshot reader all read
archives made elsewhere, so all three judge a member's name here, the same way:

- ``\\`` is a path separator (Windows archivers write it; a zip must use ``/``);
- empty and ``.`` components are dropped; the archive root itself (``.``, ``./``) is no member;
- refused (:class:`UnsafeArchive`, naming the member): a NUL byte, an absolute path (``/…``,
  ``C:…``, ``//server/…``), a ``..`` component, a component starting with the reserved
  ``.atoll-staging-``, and a component over 255 bytes or a name over 4,096 bytes (more than
  Linux can create);
- junk that desktop archivers add is skipped and counted, not refused: ``__MACOSX/`` trees,
  ``.DS_Store``, ``Thumbs.db`` and AppleDouble ``._*`` files;
- in a world archive a top-level ``apps_data/`` is ``.apps_data/`` (some exports drop the dot).

A zip member's file type (a symbolic link, a device) is read here too, the one way every zip
reader reads it (:func:`zip_mode`, :func:`zip_file_type`, :func:`is_zip_symlink`): from the Unix mode an archiver
records in the high 16 bits of ``external_attr``, whatever system the zip claims to come from
(a link that a reader took for a file would hand its target's name on as the file's bytes).
What each reader does with a link is its own policy: the loader refuses it, populate keeps it
only when it stays inside the world, the grader's snapshot and gold readers skip it.
"""

from __future__ import annotations

import re
import stat
from typing import TYPE_CHECKING

from atoll.errors import AtollError, ErrorCode

if TYPE_CHECKING:
    import zipfile

FILESYSTEM = "filesystem"
APPS_DATA = ".apps_data"
WORLD_TREES = (FILESYSTEM, APPS_DATA)
#: Names beginning so are populate's staging directories; no member may use or imitate one.
RESERVED_PREFIX = ".atoll-staging-"
NAME_MAX = 255
PATH_MAX = 4096

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")
_JUNK_FILES = frozenset({".DS_Store", "Thumbs.db"})
_JUNK_DIRS = frozenset({"__MACOSX"})


class UnsafeArchive(AtollError):
    """An archive member (or the archive as a whole) that a reader refuses; names the member.

    ``problem`` completes a sentence about the member ("contains '..'").
    """

    def __init__(self, member: str, problem: str, code: ErrorCode = ErrorCode.unsafe_archive) -> None:
        super().__init__(code, f"archive member {member!r}: {problem}" if member else f"archive: {problem}")
        self.member = member
        self.problem = problem


def clean_member_name(name: str) -> str | None:
    """The member's relative POSIX path, or None for the archive root itself.

    Raises UnsafeArchive for the names refused above (see the module docstring).
    """
    if "\x00" in name:
        raise UnsafeArchive(name, "contains a NUL byte")
    if len(name.encode("utf-8", "surrogateescape")) > PATH_MAX:
        raise UnsafeArchive(name, f"is longer than {PATH_MAX} bytes")
    slashed = name.replace("\\", "/")
    if slashed.startswith("/") or _WINDOWS_DRIVE.match(slashed):
        raise UnsafeArchive(name, "is an absolute path")
    parts = [part for part in slashed.split("/") if part not in ("", ".")]
    for part in parts:
        if part == "..":
            raise UnsafeArchive(name, "contains '..'")
        if part.startswith(RESERVED_PREFIX):
            raise UnsafeArchive(name, f"uses the reserved prefix {RESERVED_PREFIX!r}")
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            raise UnsafeArchive(name, f"has a component longer than {NAME_MAX} bytes")
    return "/".join(parts) or None


def is_junk(path: str) -> bool:
    """True for desktop-archiver litter (``__MACOSX/…``, ``.DS_Store``, ``Thumbs.db``, ``._*``).

    ``path`` is a cleaned name (see :func:`clean_member_name`).
    """
    parts = path.split("/")
    if _JUNK_DIRS.intersection(parts):
        return True
    base = parts[-1]
    return base in _JUNK_FILES or base.startswith("._")


def world_member(path: str) -> str:
    """A cleaned name of a world archive with a top-level ``apps_data`` spelled ``.apps_data``."""
    top, slash, rest = path.partition("/")
    return f"{APPS_DATA}{slash}{rest}" if top == "apps_data" else path


def split_world_member(path: str) -> tuple[str, str] | None:
    """``(tree, path inside it)`` for a cleaned world member, or None outside both trees.

    ``apps_data/x`` counts as ``.apps_data/x``; the tree folder itself gives ``(tree, "")``.
    """
    top, _, rest = world_member(path).partition("/")
    return (top, rest) if top in WORLD_TREES else None


def zip_mode(info: zipfile.ZipInfo) -> int:
    """The member's Unix mode (file type and permission bits) as the archiver recorded it; 0
    when it recorded none (Windows archivers)."""
    return info.external_attr >> 16


def zip_file_type(info: zipfile.ZipInfo) -> int:
    """The member's Unix file type (``stat.S_IFMT`` bits: ``S_IFREG``, ``S_IFLNK``, ...) as the
    archiver recorded it; 0 when it recorded none."""
    return stat.S_IFMT(zip_mode(info))


def is_zip_symlink(info: zipfile.ZipInfo) -> bool:
    """Whether the zip member is a symbolic link (its data is the link's target, not a file)."""
    return zip_file_type(info) == stat.S_IFLNK
