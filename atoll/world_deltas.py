"""A world as files from its manifest (:mod:`atoll.world_manifest`): the deterministic archive
a manifest and its blobs give, and deltas, written and read.

A **delta** is one gzip'd tar: ``manifest.json`` first (the whole world's manifest), then
``blobs/<sha256>`` for each file content that its base lacks. Deltas are read as untrusted
input: the manifest is checked as :meth:`WorldManifest.from_bytes` checks it (through
:func:`read_manifest`), the blob count is capped, and every blob read is checked against its name.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from atoll.content_cache import ContentCache
from atoll.world_archive import ArchiveWriter
from atoll.world_manifest import (
    MAX_ENTRIES,
    MAX_MANIFEST_BYTES,
    SHA256_HEX,
    Entry,
    ManifestError,
    WorldManifest,
    sha256_of,
)

MANIFEST_MEMBER = "manifest.json"
BLOB_PREFIX = "blobs/"

#: Manifests read by :func:`read_manifest`, by the sha256 of their JSON: the same bytes come
#: back for every trial of a world (the environment's manifest of a freshly populated seed),
#: and parsing 150 entries costs milliseconds. Bounded in count and in entries.
_PARSED: ContentCache[WorldManifest] = ContentCache(
    max_entries=64, max_weight=200_000, weigh=lambda manifest: len(manifest.entries)
)


def read_manifest(data: bytes, source: str) -> WorldManifest:
    """:meth:`WorldManifest.from_bytes`, parsed once per content: each call returns a manifest
    of its own (its entries, which are frozen, are shared), so changing one changes no other.
    A manifest refused is refused every time (a refusal is never kept)."""
    if len(data) > MAX_MANIFEST_BYTES:
        return WorldManifest.from_bytes(data, source)  # refused, naming the limit
    kept = _PARSED.get(data, None, lambda: WorldManifest.from_bytes(data, source))
    return kept.model_copy(update={"entries": list(kept.entries)})


def write_archive(
    manifest: WorldManifest, open_blob: Callable[[Entry], BinaryIO], sink: BinaryIO
) -> tuple[int, str]:
    """Write the world's deterministic archive (the bytes ``/data/snapshot`` gives for it) to
    ``sink``, each file's content read from ``open_blob(entry)`` (a reader of exactly its size,
    closed after); returns (size, sha256) of the archive."""
    writer = ArchiveWriter(sink)
    try:
        for entry in manifest.entries:
            if entry.type == "dir":
                writer.add_directory(entry.path)
                continue
            with open_blob(entry) as source:
                writer.add_file(entry.path, source, entry.size, executable=entry.executable)
    except BaseException:
        writer.abort()
        raise
    return writer.finish()


def write_delta(manifest: WorldManifest, blobs: Iterable[tuple[str, BinaryIO, int]], sink: BinaryIO) -> None:
    """Write a delta: ``manifest`` then each ``(sha256, reader, size)`` blob, gzip'd (level 1:
    deltas are written on a trial's path and hold what the agent wrote, often compressed)."""
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=1)
    with gz, tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # noqa: SIM117
        data = manifest.to_bytes()
        tar.addfile(_plain(MANIFEST_MEMBER, len(data)), io.BytesIO(data))
        for sha256, reader, size in blobs:
            tar.addfile(_plain(BLOB_PREFIX + sha256, size), reader)


def _plain(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


class Delta:
    """A delta file: its manifest (read at once) and the blobs it holds, read on demand and
    checked against their names. Raises :class:`ManifestError` for anything else."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.blob_sizes: dict[str, int] = {}
        try:
            with tarfile.open(self.path, "r:gz") as tar:
                first = tar.next()
                if first is None or first.name != MANIFEST_MEMBER or not first.isreg():
                    raise ManifestError(f"delta {self.path}: its first member is not {MANIFEST_MEMBER}")
                handle = tar.extractfile(first)
                assert handle is not None
                self.manifest = read_manifest(handle.read(MAX_MANIFEST_BYTES + 1), f"delta {self.path}")
                while (member := tar.next()) is not None:
                    name = member.name.removeprefix(BLOB_PREFIX)
                    if not member.isreg() or member.name == name or not SHA256_HEX.match(name):
                        raise ManifestError(f"delta {self.path}: unexpected member {member.name!r}")
                    self.blob_sizes[name] = member.size
                    if len(self.blob_sizes) > MAX_ENTRIES:
                        raise ManifestError(f"delta {self.path}: more than {MAX_ENTRIES} blobs")
        except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ManifestError(f"delta {self.path}: cannot read: {exc}") from None

    def read_blobs(self, wanted: Iterable[str]) -> dict[str, bytes]:
        """The contents of the wanted blobs this delta holds, in one pass."""
        return dict(self.iter_blobs(set(wanted) & self.blob_sizes.keys()))

    def iter_blobs(self, wanted: set[str]) -> Iterator[tuple[str, bytes]]:
        if not wanted:
            return
        try:
            with tarfile.open(self.path, "r:gz") as tar:
                for member in tar:
                    name = member.name.removeprefix(BLOB_PREFIX)
                    if name not in wanted:
                        continue
                    handle = tar.extractfile(member)
                    data = handle.read() if handle is not None else b""
                    if sha256_of(data) != name:
                        raise ManifestError(f"delta {self.path}: blob {name[:12]}… does not hold its content")
                    yield name, data
        except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ManifestError(f"delta {self.path}: cannot read: {exc}") from None


def is_delta(path: str | Path) -> bool:
    """Whether ``path`` is a delta (a gzip'd tar whose first member is ``manifest.json``)."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            first = tar.next()
            return first is not None and first.name == MANIFEST_MEMBER
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile):
        return False


__all__ = [
    "BLOB_PREFIX",
    "MANIFEST_MEMBER",
    "Delta",
    "is_delta",
    "write_archive",
    "write_delta",
]
