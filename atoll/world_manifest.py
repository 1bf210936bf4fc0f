"""World manifests and deltas: a world as what each path holds, not as the bytes again.

A **manifest** lists a world's members in snapshot order (``filesystem`` and its tree sorted by
path, then ``.apps_data`` and its tree), each a directory or a regular file with its size,
sha256 and executable bit: everything the deterministic archive (:mod:`atoll.world_archive`)
is made of except the contents, which are **blobs** named by their sha256. So a manifest and
its blobs give back the very archive ``/data/snapshot`` gives, byte for byte, and the digest
of a manifest (:meth:`WorldManifest.digest`, over its entries only) names a world as well as
the archive's sha256 does.

A **delta** (:mod:`atoll.world_deltas`, which writes and reads them and writes a manifest's
archive) is a manifest with the blobs its base (the world as populated: the seed) lacks. A
trial's after-state is a delta; the contents it does not hold are its base's. The JSON fields
``base`` and ``blobs`` name, as URIs relative to the manifest's own location, the manifest a
delta builds on and the folder of blobs a stored manifest's contents are in
(:mod:`atoll.world_store` resolves them).

Manifests are read as untrusted input: entry paths follow :mod:`atoll.members` (no ``..``, no
absolute path, only the two world trees), and sizes and counts are capped.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from functools import cached_property
from typing import Final, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.members import APPS_DATA, FILESYSTEM, UnsafeArchive, clean_member_name

FORMAT: Final = "atoll-world/1"
#: Most entries a manifest may list, and most bytes of its JSON (a world of a million files
#: has a manifest of about 150 MB: past these it is refused while it is read).
MAX_ENTRIES = 1_000_000
MAX_MANIFEST_BYTES = 256 * 1024**2
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(AtollError):
    """A manifest or delta that cannot be read or is not one; names the file and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.bad_world_manifest, message)


class Entry(BaseModel):
    """One member of a world: a directory, or a regular file with its size and content hash."""

    model_config = {"frozen": True, "extra": "forbid"}

    path: str = Field(description="member path: filesystem/… or .apps_data/…, or a tree's root")
    type: Literal["dir", "file"]
    size: int = Field(0, ge=0)
    sha256: str | None = None
    executable: bool = False

    @field_validator("path")
    @classmethod
    def _safe_path(cls, path: str) -> str:
        try:
            cleaned = clean_member_name(path)
        except UnsafeArchive as exc:
            raise ValueError(exc.message) from None
        if cleaned != path or path.split("/", 1)[0] not in (FILESYSTEM, APPS_DATA):
            raise ValueError(f"{path!r} is not a member path of a world (filesystem/… or .apps_data/…)")
        return path

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not SHA256_HEX.match(value):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        return value

    def model_post_init(self, _context: object) -> None:
        if self.type == "file" and self.sha256 is None:
            raise ValueError(f"file {self.path!r} has no sha256")
        if self.type == "dir" and (self.sha256 is not None or self.size or self.executable):
            raise ValueError(f"directory {self.path!r} has file fields")

    @cached_property
    def digest_line(self) -> bytes:
        """This entry's line of the manifest digest (an entry is frozen: computed once)."""
        return (
            json.dumps(
                [self.type, self.path, self.size, self.sha256, self.executable], separators=(",", ":")
            ).encode()
            + b"\n"
        )


class WorldManifest(BaseModel):
    """A world's members in snapshot order; ``base`` and ``blobs`` are relative URIs (module doc)."""

    model_config = {"extra": "forbid"}

    format: Literal["atoll-world/1"] = FORMAT
    base: str | None = Field(None, description="a delta's base manifest, relative to this one")
    base_digest: str | None = Field(None, description="the digest the base manifest must have")
    blobs: str | None = Field(None, description="the folder holding this world's blobs, relative")
    entries: list[Entry] = Field(default_factory=list, max_length=MAX_ENTRIES)

    def digest(self) -> str:
        """The world's identity: sha256 over its entries (not where they are stored)."""
        return manifest_digest(self.entries)

    def files(self) -> dict[str, Entry]:
        """Regular files by member path."""
        return {entry.path: entry for entry in self.entries if entry.type == "file"}

    def hashes(self) -> set[str]:
        return {entry.sha256 for entry in self.entries if entry.sha256 is not None}

    def to_bytes(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> WorldManifest:
        """The manifest in ``data`` (its JSON), checked; raises ManifestError naming ``source``.
        (:func:`atoll.world_deltas.read_manifest` reads the same bytes once per process.)"""
        if len(data) > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{source}: manifest larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            manifest = cls.model_validate_json(data)
        except ValidationError as exc:
            where, message, _ = first_problem(exc)
            raise ManifestError(f"{source}: not a world manifest: {where}: {message}") from None
        manifest.check_order(source)
        return manifest

    def check_order(self, source: str) -> None:
        """The members must be unique and in snapshot order (what makes the archive the same)."""
        keys = [_order_key(entry.path) for entry in self.entries]
        if any(later <= earlier for earlier, later in zip(keys, keys[1:], strict=False)):
            raise ManifestError(f"{source}: entries are not unique and in snapshot order")


def _order_key(path: str) -> tuple[int, str]:
    top, _, _ = path.partition("/")
    return (0 if top == FILESYSTEM else 1, path)


def manifest_digest(entries: Iterable[Entry]) -> str:
    digest = hashlib.sha256(FORMAT.encode())
    digest.update(b"".join(entry.digest_line for entry in entries))
    return digest.hexdigest()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = [
    "FORMAT",
    "MAX_ENTRIES",
    "MAX_MANIFEST_BYTES",
    "SHA256_HEX",
    "Entry",
    "ManifestError",
    "WorldManifest",
    "manifest_digest",
    "sha256_of",
]
