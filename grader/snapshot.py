"""Read world snapshots: a tar.gz from ``/data/snapshot`` or a world zip (APEX/Archipelago layout),
or a stored world (a manifest or a delta, :mod:`atoll.world_store`) as :class:`ManifestSnapshot`.

Both forms hold members ``filesystem/<path>`` and ``.apps_data/<path>``.  A zip whose members
have neither prefix (an Archipelago export of the filesystem alone) is read as ``filesystem/``.
Member names follow :mod:`atoll.members`, the rules the loader and populate use: ``\\`` is a
separator and a top-level ``apps_data/`` is ``.apps_data/``. Only regular files are read;
names those rules refuse (absolute, ``..``, …) and desktop-archiver litter (``__MACOSX/``,
``.DS_Store``, …) are left out of the world graded and counted in :attr:`Snapshot.skipped`
(snapshots are untrusted input, and nothing here is written to disk).
"""

from __future__ import annotations

import hashlib
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from atoll.errors import AtollError, ErrorCode
from atoll.members import UnsafeArchive, clean_member_name, is_junk, is_zip_symlink, world_member
from atoll.world_manifest import WorldManifest

FS_PREFIX = "filesystem/"
APPS_PREFIX = ".apps_data/"
_CHUNK = 1 << 20
#: Most bytes a snapshot may hold once decompressed, and most members: what the environment
#: writes at most (ATOLL_SNAPSHOT_MAX_BYTES, 8 GiB). Every member is hashed when a snapshot is
#: indexed, so a gzip of terabytes of zeros (a few hundred MB) would hold a grading slot for
#: hours; past these the snapshot is refused while it is read.
MAX_BYTES = 8 * 1024**3
MAX_MEMBERS = 1_000_000


@dataclass(frozen=True)
class SnapshotEntry:
    """One regular file of a snapshot: its member path, size and content hash."""

    path: str
    size: int
    sha256: str


def _clean_name(name: str) -> str | None:
    """The normalised member name (``apps_data/`` read as ``.apps_data/``), or None when the
    shared member rules refuse it, it is litter, or it names a folder."""
    if name.endswith(("/", "\\")):
        return None
    try:
        cleaned = clean_member_name(name)
    except UnsafeArchive:
        return None
    if cleaned is None or is_junk(cleaned):
        return None
    return world_member(cleaned)


class _Reader:
    """What both readers of a world share, over their ``entries`` and ``read_many``."""

    entries: dict[str, SnapshotEntry]

    def read_many(self, paths: set[str] | list[str]) -> dict[str, bytes]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        """Content of one member; raises KeyError when absent."""
        data = self.read_many([path])
        if path not in data:
            raise KeyError(path)
        return data[path]

    def filesystem_paths(self) -> list[str]:
        """Member paths under ``filesystem/``, sorted."""
        return sorted(p for p in self.entries if p.startswith(FS_PREFIX))

    def close(self) -> None:
        """Releases what the reader holds; nothing by default."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Snapshot(_Reader):
    """A snapshot indexed by content hash; contents are read again only for the files asked for.

    Raises ``AtollError("snapshot_unreadable")`` when the file is missing or not a tar.gz/zip.
    """

    def __init__(self, location: str | Path) -> None:
        self.location = Path(location)
        if not self.location.is_file():
            raise AtollError(ErrorCode.snapshot_unreadable, f"snapshot {self.location}: no such file")
        self._kind = self._detect_kind()
        self._zip_prefixless = False
        self.entries: dict[str, SnapshotEntry] = {}
        #: Files left out: names the member rules refuse, and desktop-archiver litter.
        self.skipped = 0
        self._members = self._bytes = 0
        try:
            self._index()
        except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
            raise AtollError(
                ErrorCode.snapshot_unreadable, f"snapshot {self.location}: cannot read: {exc}"
            ) from exc

    def _detect_kind(self) -> str:
        with self.location.open("rb") as handle:
            head = handle.read(4)
        if head.startswith(b"PK"):
            return "zip"
        if head.startswith(b"\x1f\x8b") or tarfile.is_tarfile(self.location):
            return "tar"
        raise AtollError(
            ErrorCode.snapshot_unreadable, f"snapshot {self.location}: neither a tar.gz nor a zip archive"
        )

    # --- indexing -------------------------------------------------------------------------

    def _index(self) -> None:
        if self._kind == "zip":
            with zipfile.ZipFile(self.location) as archive:
                infos = [info for info in archive.infolist() if not info.is_dir()]
                names = [_clean_name(info.filename) for info in infos]
                self._zip_prefixless = not any(
                    n and (n.startswith(FS_PREFIX) or n.startswith(APPS_PREFIX)) for n in names
                )
                for info, name in zip(infos, names, strict=True):
                    if name is None:
                        self.skipped += 1
                        continue
                    if is_zip_symlink(info):
                        continue
                    path = self._member_path(name)
                    if path is None:
                        continue
                    self._count(info.filename, info.file_size)
                    digest = hashlib.sha256()
                    read = 0
                    with archive.open(info) as handle:
                        while chunk := handle.read(_CHUNK):
                            read += len(chunk)
                            if read > info.file_size:  # a size that lies: count what is read
                                self._count(info.filename, len(chunk))
                            digest.update(chunk)
                    self.entries[path] = SnapshotEntry(path, info.file_size, digest.hexdigest())
        else:
            with tarfile.open(self.location, "r:*") as archive:
                for member in archive:
                    self._count(member.name, member.size if member.isreg() else 0)
                    if not member.isreg():
                        continue
                    name = _clean_name(member.name)
                    if name is None:
                        self.skipped += 1
                        continue
                    path = self._member_path(name)
                    if path is None:
                        continue
                    digest = hashlib.sha256()
                    extracted = archive.extractfile(member)
                    if extracted is None:
                        continue
                    while chunk := extracted.read(_CHUNK):
                        digest.update(chunk)
                    self.entries[path] = SnapshotEntry(path, member.size, digest.hexdigest())

    def _count(self, name: str, size: int) -> None:
        """Add one member of ``size`` bytes to the totals; AtollError(``snapshot_too_large``)
        past :data:`MAX_BYTES` or :data:`MAX_MEMBERS`, naming the member."""
        self._members += 1
        self._bytes += size
        if self._bytes > MAX_BYTES or self._members > MAX_MEMBERS:
            raise AtollError(
                ErrorCode.snapshot_too_large,
                f"snapshot {self.location}: more than {MAX_BYTES} bytes or {MAX_MEMBERS} members "
                f"once decompressed (at member {name!r}); a world snapshot holds at most that",
            )

    def _member_path(self, name: str) -> str | None:
        if self._zip_prefixless:
            return FS_PREFIX + name
        if name.startswith(FS_PREFIX) or name.startswith(APPS_PREFIX):
            return name
        return None  # members outside the two roots are not part of the world

    def _archive_name(self, path: str) -> str:
        return path[len(FS_PREFIX) :] if self._zip_prefixless else path

    # --- reading --------------------------------------------------------------------------

    def read_many(self, paths: set[str] | list[str]) -> dict[str, bytes]:
        """Contents of the given member paths (those that exist), in one pass over the archive."""
        wanted = {p for p in paths if p in self.entries}
        found: dict[str, bytes] = {}
        if not wanted:
            return found
        if self._kind == "zip":
            with zipfile.ZipFile(self.location) as archive:
                by_name = {
                    _clean_name(i.filename): i
                    for i in archive.infolist()
                    if not i.is_dir() and not is_zip_symlink(i)
                }
                for path in wanted:
                    info = by_name.get(self._archive_name(path))
                    if info is not None:
                        found[path] = archive.read(info)
            return found
        with tarfile.open(self.location, "r:*") as archive:
            for member in archive:
                if not member.isreg():
                    continue
                name = _clean_name(member.name)
                if name in wanted:
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found[name] = handle.read()
                    if len(found) == len(wanted):
                        break
        return found


class ManifestSnapshot(_Reader):
    """A stored world (a manifest and its blobs) read as a :class:`Snapshot`: the entries come
    from the manifest, so nothing is hashed, and a read fetches only the blobs of the files
    asked for (each checked against its name by ``read_blobs``). The same member rules and
    caps (:data:`MAX_BYTES`, :data:`MAX_MEMBERS`) apply: AtollError(``snapshot_too_large``)."""

    def __init__(
        self,
        manifest: WorldManifest,
        read_blobs: Callable[[Iterable[str]], dict[str, bytes]],
        *,
        location: str | Path,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.location = location
        self.manifest = manifest
        self._read_blobs = read_blobs
        self._close = close
        self.entries: dict[str, SnapshotEntry] = {}
        self.skipped = 0
        members = total = 0
        for entry in manifest.entries:
            members += 1
            total += entry.size
            if total > MAX_BYTES or members > MAX_MEMBERS:
                raise AtollError(
                    ErrorCode.snapshot_too_large,
                    f"snapshot {location}: more than {MAX_BYTES} bytes or {MAX_MEMBERS} members "
                    f"(at member {entry.path!r}); a world snapshot holds at most that",
                )
            if entry.type != "file":
                continue
            name = _clean_name(entry.path)
            if name is None:
                self.skipped += 1
                continue
            if name.startswith(FS_PREFIX) or name.startswith(APPS_PREFIX):
                assert entry.sha256 is not None
                self.entries[name] = SnapshotEntry(name, entry.size, entry.sha256)

    def read_many(self, paths: set[str] | list[str]) -> dict[str, bytes]:
        """Contents of the given member paths (those that exist), their blobs fetched once."""
        wanted = {p: self.entries[p] for p in paths if p in self.entries}
        if not wanted:
            return {}
        blobs = self._read_blobs({entry.sha256 for entry in wanted.values()})
        found: dict[str, bytes] = {}
        for path, entry in wanted.items():
            data = blobs.get(entry.sha256)
            if data is None or len(data) != entry.size:
                raise AtollError(
                    ErrorCode.snapshot_unreadable,
                    f"snapshot {self.location}: the content of {path!r} is missing or not {entry.size} bytes",
                )
            found[path] = data
        return found

    def close(self) -> None:
        """Releases what the stored world holds (a downloaded delta); idempotent."""
        if self._close is not None:
            self._close()
            self._close = None


#: Either reader of a world: what the diff and the grader take.
AnySnapshot = Snapshot | ManifestSnapshot


def open_snapshot(
    location: str | Path, *, root: str | None = None, storage_options: dict | None = None
) -> Snapshot | ManifestSnapshot:
    """The snapshot at ``location``: a local tar.gz or world zip (:class:`Snapshot`), or a stored
    world (a ``*.manifest.json`` or ``*.delta.tar.gz``, local or any fsspec URL) read in place
    as a :class:`ManifestSnapshot`; a legacy archive at a remote URL is downloaded first (and
    removed on :meth:`close`). ``root`` is the artifact store root its references must stay
    under; None infers it (the nearest folder above holding ``blobs/``,
    :func:`atoll.world_store.infer_root`). Raises AtollError (``snapshot_unreadable``, or those
    of :func:`atoll.world_store.open_world`)."""
    from atoll import world_store

    text = str(location)
    remote = "://" in text and not text.startswith("file://")
    kind = world_store.world_kind(text)
    if kind == "archive" and not remote:
        return Snapshot(text.removeprefix("file://") if text.startswith("file://") else text)
    if root is None:
        root = world_store.infer_root(text, storage_options=storage_options)
    world = world_store.open_world(text, root=root, storage_options=storage_options)
    try:
        if world.manifest is None:
            snapshot = Snapshot(world.archive_path())
            snapshot.close = world.close  # type: ignore[method-assign]
            return snapshot
        return ManifestSnapshot(world.manifest, world.read_blobs, location=text, close=world.close)
    except BaseException:
        world.close()
        raise


def virtual_path(member_path: str) -> str:
    """``filesystem/Reports/x.xlsx`` -> ``/Reports/x.xlsx`` (the path as the agent sees it)."""
    if member_path.startswith(FS_PREFIX):
        return "/" + member_path[len(FS_PREFIX) :]
    return member_path


def member_path(virtual: str) -> str:
    """``/Reports/x.xlsx`` -> ``filesystem/Reports/x.xlsx``; member paths are returned unchanged."""
    if virtual.startswith(FS_PREFIX) or virtual.startswith(APPS_PREFIX):
        return virtual
    return FS_PREFIX + virtual.lstrip("/")
