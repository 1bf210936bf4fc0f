"""What the environment remembers of its world, and deltas of the world against its base.

:class:`WorldState` is kept per world (per environment): the :class:`StatCache` of its files
and the manifest of the world as the last ``replace`` populate left it — the **base** of
every delta until the next one (before any, the empty world). Every populate clears the
cache; a replace populate then lists the world once, filling the cache, so the manifest a
trial asks for right after (the freshness check) costs only ``stat`` calls.

A delta (:func:`atoll.world_deltas.write_delta`) is the whole current manifest plus one blob
per file content the base lacks. :func:`collect_delta` runs under the world lock and copies
those contents to one temp file as it lists the world; :func:`write_world_delta` compresses
them after the lock is released.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from atoll.errors import AtollError
from atoll.members import APPS_DATA, FILESYSTEM
from atoll.world_deltas import write_delta
from atoll.world_manifest import Entry, WorldManifest
from environment.populate import WorldRoots
from environment.snapshot import SnapshotLimits, build_manifest
from environment.stat_cache import StatCache, wait_for_clock_tick
from environment.world_walk import Budget, Member, stable_copy

logger = logging.getLogger("environment.delta")

#: The world before anything was populated: both trees, empty.
EMPTY_WORLD = WorldManifest(entries=[Entry(path=FILESYSTEM, type="dir"), Entry(path=APPS_DATA, type="dir")])
_CHUNK = 1 << 20


@dataclass
class WorldState:
    """The stat cache and the populated base of one world. Used under the world lock."""

    cache: StatCache = field(default_factory=StatCache)
    populated_digest: str = field(default_factory=EMPTY_WORLD.digest)
    populated_hashes: frozenset[str] = frozenset()  # the contents a delta need not carry
    laid_from: str | None = None  # the local folder of the last replace, while it may be parked

    def record_populated(self, manifest: WorldManifest) -> None:
        self.populated_digest = manifest.digest()
        self.populated_hashes = frozenset(manifest.hashes())


def list_populated(roots: WorldRoots, state: WorldState, limits: SnapshotLimits) -> None:
    """After a replace populate (under the world lock): list the world as the new base,
    filling the cache. A world that cannot be listed (too large, too slow, a name a manifest
    cannot carry) leaves the empty world as the base: its deltas then carry every file."""
    wait_for_clock_tick()  # so the hashes of the files just written are kept (stat_cache)
    try:
        manifest = build_manifest(roots, limits, state.cache)
    except (AtollError, OSError) as exc:  # SnapshotTooLarge, SnapshotTimeout, UnlistableMember
        logger.warning("populated world not listed; deltas carry every file", extra={"error": str(exc)})
        state.record_populated(EMPTY_WORLD)
        return
    state.record_populated(manifest)


class BlobSpool:
    """The contents a delta carries, copied while the world is listed: one temp file, each
    distinct content once (in manifest order), none the base holds. Closed by the caller."""

    def __init__(self, base_hashes: frozenset[str], limits: SnapshotLimits) -> None:
        self.base_hashes = base_hashes
        self.limits = limits
        self.file: BinaryIO = tempfile.TemporaryFile(prefix="atoll-delta-blobs-")  # noqa: SIM115
        self.spans: dict[str, tuple[int, int]] = {}  # sha256 -> (offset, size)
        self._budget: Budget | None = None

    def wants(self, sha256: str) -> bool:
        return sha256 not in self.base_hashes and sha256 not in self.spans

    def take(self, root_fd: int, member: Member, budget: Budget) -> tuple[int, str] | None:
        """Copy the member's file (a stable read, as the snapshot's) and keep it as a blob
        unless the base or this spool already holds that content; (size, sha256) of the copy."""
        if self._budget is None:
            # Its own counters (the listing already counted these files once), same deadline.
            self._budget = Budget(self.limits)
            self._budget.deadline = budget.deadline
        copy = stable_copy(root_fd, member, self._budget)
        if copy is None:
            return None
        start = self.file.seek(0, os.SEEK_END)
        digest = hashlib.sha256()
        with copy:
            while chunk := copy.read(_CHUNK):
                digest.update(chunk)
                self.file.write(chunk)
        size = self.file.tell() - start
        sha256 = digest.hexdigest()
        if self.wants(sha256):
            self.spans[sha256] = (start, size)
        else:  # it changed since it was hashed, into something already held
            self.file.truncate(start)
        return size, sha256

    def blobs(self) -> Iterator[tuple[str, BinaryIO, int]]:
        for sha256, (start, size) in self.spans.items():
            self.file.seek(start)  # write_delta reads exactly ``size`` bytes from here
            yield sha256, self.file, size

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> BlobSpool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass
class DeltaContents:
    """A delta collected under the lock, to be written after it: the manifest and its blobs."""

    manifest: WorldManifest
    digest: str
    spool: BlobSpool


@dataclass(frozen=True)
class DeltaBase:
    """A base a client names by its manifest, instead of the populated world."""

    digest: str
    hashes: frozenset[str]

    @classmethod
    def of(cls, manifest: WorldManifest) -> DeltaBase:
        return cls(manifest.digest(), frozenset(manifest.hashes()))


def collect_delta(
    roots: WorldRoots,
    state: WorldState,
    limits: SnapshotLimits,
    base: str | None,
    given: DeltaBase | None = None,
) -> DeltaContents:
    """List the world (cache-assisted) and copy the contents its base lacks: the populated
    world's, or ``given``'s. Under the world lock, in a worker thread. Raises what
    :func:`build_manifest` raises."""
    spool = BlobSpool(given.hashes if given is not None else state.populated_hashes, limits)
    try:
        manifest = build_manifest(roots, limits, state.cache, blobs=spool)
    except BaseException:
        spool.close()
        raise
    digest = manifest.digest()
    manifest.base = base
    manifest.base_digest = given.digest if given is not None else state.populated_digest
    return DeltaContents(manifest, digest, spool)


@dataclass(frozen=True)
class DeltaInfo:
    size_bytes: int
    sha256: str
    blobs: int
    blob_bytes: int


def write_world_delta(contents: DeltaContents, sink: BinaryIO) -> DeltaInfo:
    """Write the collected delta to ``sink`` (no lock needed: it reads only the spool)."""
    hashing = _HashingSink(sink)
    with contents.spool:
        write_delta(contents.manifest, contents.spool.blobs(), hashing)  # type: ignore[arg-type]
        spans = contents.spool.spans
    return DeltaInfo(
        hashing.size, hashing.digest.hexdigest(), len(spans), sum(size for _, size in spans.values())
    )


class _HashingSink:
    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sink.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.sink.flush()
