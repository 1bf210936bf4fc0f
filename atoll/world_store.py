"""Worlds in an artifact store: content-addressed blobs, stored manifests and trial deltas.

Layout under a store root (a local folder or any fsspec URL, ``s3://bucket/prefix`` …):

- ``blobs/sha256/<hex[:2]>/<hex>``: one file content, gzip'd (mtime 0, level 6), named by the
  sha256 of the uncompressed content; written only when absent (a temporary name, then a
  move, so two writers of the same blob never leave a half-written one), checked on every read;
- ``seeds/<name>.manifest.json``: a stored world, a :class:`~atoll.world_manifest.WorldManifest`
  whose ``blobs`` is ``../blobs/sha256`` (relative to the manifest);
- ``<trial folder>/after.delta.tar.gz``: a trial's after-state, a delta whose ``base`` is the
  seed manifest (relative to the delta's folder) with its ``base_digest``; the contents its
  base lacks are inside it;
- legacy full archives (``seeds/<name>.tar.gz``, ``<folder>/after.tar.gz``, user-given tar.gz
  or zip files) stay readable: :func:`open_world` gives them without a manifest.

References inside manifests and deltas (``base``, ``blobs``) are untrusted: each must be a
relative path that, once resolved against the referring file's folder, stays under the store
root; anything else is refused with AtollError(``bad_world_reference``) naming it.

This module imports nothing from the services, so the grader and the CLI use it as they are.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from atoll.errors import AtollError, ErrorCode
from atoll.world_blobs import (
    BLOB_FOLDER,
    BlobIntegrityError,
    BlobStore,
    HasFilesystem,
    StoreRoot,
    local_url,
    open_location,
    protocol_of,
    store_root,
)
from atoll.world_deltas import Delta, is_delta, read_manifest, write_archive
from atoll.world_manifest import Entry, ManifestError, WorldManifest

MANIFEST_SUFFIX = ".manifest.json"
DELTA_SUFFIX = ".delta.tar.gz"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_CHUNK = 1 << 20


def _reference_error(message: str) -> AtollError:
    return AtollError(ErrorCode.bad_world_reference, message)


# --- references ---------------------------------------------------------------------------


def relative_reference(from_key: str, to_key: str) -> str:
    """The relative URI that names ``to_key`` from the file at ``from_key`` (both keys under one
    store root): what ``base`` and ``blobs`` hold (``relative_reference("a/b/after.delta.tar.gz",
    "seeds/x.manifest.json") == "../../seeds/x.manifest.json"``)."""
    return posixpath.relpath(to_key, posixpath.dirname(from_key) or ".")


def resolve_reference(referrer: str, reference: str, root_path: str, *, field: str) -> str:
    """The path ``reference`` names, relative to the folder of ``referrer`` (a path on the
    store's filesystem), once checked: AtollError(``bad_world_reference``) naming it when it is
    absolute, has a scheme, holds a backslash or NUL, or leaves ``root_path`` once normalised."""
    if not reference or "\x00" in reference or "\\" in reference:
        raise _reference_error(f"{referrer}: {field} {reference!r} is not a relative path")
    if reference.startswith("/") or _SCHEME.match(reference) or "://" in reference:
        raise _reference_error(
            f"{referrer}: {field} {reference!r} must be relative to the file (no scheme, not absolute)"
        )
    absolute = referrer.startswith("/")
    folder = posixpath.dirname(referrer)
    resolved = posixpath.normpath(posixpath.join(folder, reference))
    if absolute and not resolved.startswith("/"):  # normpath keeps a leading "//"
        resolved = "/" + resolved
    root = root_path.rstrip("/")
    if not resolved.startswith(root + "/"):
        raise _reference_error(
            f"{referrer}: {field} {reference!r} leads outside the artifact store ({root or '/'})"
        )
    return resolved


# --- storing ------------------------------------------------------------------------------


def seed_manifest_key(name: str) -> str:
    """Where a stored world (a seed) named ``name`` goes: ``seeds/<name>.manifest.json``."""
    return f"seeds/{name}{MANIFEST_SUFFIX}"


def store_world(
    store: str | Path | HasFilesystem | BlobStore,
    key: str,
    manifest: WorldManifest,
    open_member: Callable[[Entry], BinaryIO],
    *,
    storage_options: dict | None = None,
) -> str:
    """Store a world under ``key`` (a key ending ``.manifest.json``, as
    :func:`seed_manifest_key` gives): every blob the store lacks (read from
    ``open_member(entry)``, closed after, checked against the entry's sha256), then the
    manifest, last, with ``blobs`` pointing at the blob folder. Returns the manifest's URI.

    Idempotent, and safe when several processes store the same world at once. A manifest
    already under ``key`` for another world is AtollError(``world_key_taken``): deltas name
    their base by digest, so a stored world is never replaced."""
    if not key.endswith(MANIFEST_SUFFIX) or key.startswith("/") or ".." in key.split("/"):
        raise ValueError(f"world key {key!r} must be a relative key ending {MANIFEST_SUFFIX}")
    blobs = store if isinstance(store, BlobStore) else BlobStore(store, storage_options=storage_options)
    root = blobs.store_root
    manifest_path = root.full(key)
    digest = manifest.digest()
    stored = _read_existing_manifest(root.fs, manifest_path)
    if stored is not None:
        if stored.digest() != digest:
            raise AtollError(
                ErrorCode.world_key_taken,
                f"{root.uri(manifest_path)} holds another world (digest {stored.digest()})",
            )
        # Written again, unchanged: its time says it is in use, which the garbage collector
        # reads before it removes an unused seed (orchestrator/world_gc.py).
        _put_atomically(root.fs, manifest_path, stored.to_bytes())
        return root.uri(manifest_path)
    files: dict[str, Entry] = {}
    for entry in manifest.entries:
        if entry.sha256 is not None:
            files.setdefault(entry.sha256, entry)
    # Existence checks are round trips on an object store: ask them side by side.
    with ThreadPoolExecutor(max_workers=8 if protocol_of(root.fs) != "file" else 1) as pool:
        present = dict(zip(files, pool.map(blobs.has, files), strict=True))
    for sha256, entry in files.items():
        if present[sha256]:
            continue
        with open_member(entry) as reader:
            blobs._write(sha256, reader)
    stored_manifest = manifest.model_copy(
        update={"blobs": relative_reference(key, blobs.folder), "base": None, "base_digest": None}
    )
    _put_atomically(root.fs, manifest_path, stored_manifest.to_bytes())
    return root.uri(manifest_path)


def _read_existing_manifest(fs: Any, path: str) -> WorldManifest | None:
    try:
        with fs.open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    return read_manifest(data, path)


def _put_atomically(fs: Any, path: str, data: bytes) -> None:
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    partial = f"{path}.{uuid.uuid4().hex}.partial"
    with fs.open(partial, "wb") as handle:
        handle.write(data)
    fs.mv(partial, path)


# --- reading ------------------------------------------------------------------------------


def world_kind(location: str | Path) -> str:
    """``manifest``, ``delta`` or ``archive`` (a legacy tar.gz or zip), by name; a local file
    with another name is told by its content (a JSON object, or a tar.gz whose first member is
    ``manifest.json``)."""
    name = str(location)
    if name.endswith(MANIFEST_SUFFIX):
        return "manifest"
    if name.endswith(DELTA_SUFFIX):
        return "delta"
    if "://" not in name or name.startswith("file://"):
        path = Path(local_url(name).removeprefix("file://"))
        try:
            with path.open("rb") as handle:
                head = handle.read(64).lstrip()
        except OSError:
            return "archive"
        if head.startswith(b"{"):
            return "manifest"
        if head.startswith(b"\x1f\x8b") and is_delta(path):
            return "delta"
    return "archive"


class StoredWorld:
    """A world read from a store: :attr:`manifest` (None for a legacy archive) and its blobs.

    Use it as a context manager: a delta or an archive on a remote store is downloaded to a
    temporary file that :meth:`close` removes."""

    def __init__(self, uri: str, kind: str) -> None:
        self.uri = uri
        self.kind = kind
        self.manifest: WorldManifest | None = None
        self.delta: Delta | None = None
        self.blob_folders: list[BlobStore] = []
        self._archive: Path | None = None
        self._scratch: Path | None = None
        self._finalizer: weakref.finalize | None = None

    def __enter__(self) -> StoredWorld:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def _scratch_folder(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="atoll-world-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._scratch, True)
        return self._scratch

    def read_blobs(self, wanted: Iterable[str]) -> dict[str, bytes]:
        """The contents of the wanted blobs (each checked against its name): the delta's own
        first, then the blob folders. AtollError(``blob_missing``) for one found nowhere."""
        wanted = set(wanted)
        found = self.delta.read_blobs(wanted) if self.delta is not None else {}
        for sha256 in sorted(wanted - found.keys()):
            found[sha256] = self._blob_store_for(sha256).get(sha256)
        return found

    def open_blob(self, entry: Entry) -> BinaryIO:
        """A reader of one file's content (what :func:`write_archive` asks for)."""
        assert entry.sha256 is not None
        if self.delta is not None and entry.sha256 in self.delta.blob_sizes:
            return (self._unpacked_delta() / entry.sha256).open("rb")
        return self._blob_store_for(entry.sha256).open(entry.sha256)

    def _unpacked_delta(self) -> Path:
        """The delta's blobs as files (checked), unpacked in one pass on first use: reading
        them one by one from the gzip'd tar would read it again for each."""
        assert self.delta is not None
        folder = self._scratch_folder() / "delta-blobs"
        if not folder.is_dir():
            partial = self._scratch_folder() / "delta-blobs.partial"
            partial.mkdir()
            for sha256, data in self.delta.iter_blobs(set(self.delta.blob_sizes)):
                (partial / sha256).write_bytes(data)
            partial.rename(folder)
        return folder

    def _blob_store_for(self, sha256: str) -> BlobStore:
        for folder in self.blob_folders[:-1]:
            if folder.has(sha256):
                return folder
        if not self.blob_folders:
            raise AtollError(ErrorCode.blob_missing, f"world {self.uri}: blob {sha256[:12]}… is not in it")
        return self.blob_folders[-1]

    def archive_path(self) -> Path:
        """A local file holding a legacy archive (downloaded once when the store is remote)."""
        assert self._archive is not None, "only legacy archives have an archive path"
        return self._archive


def open_world(uri: str | Path, *, root: str | Path, storage_options: dict | None = None) -> StoredWorld:
    """Open the world at ``uri`` (a local path or any fsspec URL): a manifest
    (``*.manifest.json``), a delta (``*.delta.tar.gz``, its ``base`` resolved and checked
    against ``base_digest``) or a legacy archive (tar.gz or zip, with no manifest). ``root`` is
    the artifact store root that references must stay under.

    Raises AtollError: ``bad_world_manifest`` (not a manifest or delta), ``bad_world_reference``
    (a reference that is absolute, has a scheme or leaves ``root``), ``world_base_mismatch`` (a
    base that is not the world the delta was made on), ``artifact_unreadable``."""
    fs, path = open_location(uri, storage_options)
    root_of_store = store_root(str(root), storage_options)
    uri_text = f"{protocol_of(fs)}://{path}"
    kind = world_kind(uri)
    world = StoredWorld(uri_text, kind)
    try:
        if kind == "archive":
            world._archive = _local_copy(world, fs, path, "archive")
            return world
        if kind == "delta":
            local = _local_copy(world, fs, path, "after.delta.tar.gz")
            try:
                world.delta = Delta(local)
            except ManifestError as exc:  # name the stored delta, not its temporary copy
                raise ManifestError(exc.message.replace(str(local), uri_text)) from None
            world.manifest = world.delta.manifest
        else:
            world.manifest = _read_manifest(fs, path)
        _check_same_store(fs, root_of_store, uri_text)
        world.blob_folders = _blob_folders(fs, path, world.manifest, root_of_store, depth=0)
        return world
    except BaseException:
        world.close()
        raise


def _check_same_store(fs: Any, root: StoreRoot, uri: str) -> None:
    if protocol_of(fs) != protocol_of(root.fs):
        raise _reference_error(f"{uri} is not in the artifact store {root.url}")


def _local_copy(world: StoredWorld, fs: Any, path: str, name: str) -> Path:
    if protocol_of(fs) == "file":
        local = Path(path)
        if not local.is_file():
            raise AtollError(ErrorCode.artifact_unreadable, f"world {path}: no such file")
        return local
    target = world._scratch_folder() / name
    try:
        with fs.open(path, "rb") as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink, _CHUNK)
    except (OSError, ValueError) as exc:
        raise AtollError(ErrorCode.artifact_unreadable, f"world {world.uri}: {exc}") from None
    return target


def _read_manifest(fs: Any, path: str) -> WorldManifest:
    from atoll.world_manifest import MAX_MANIFEST_BYTES

    try:
        with fs.open(path, "rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise AtollError(ErrorCode.artifact_unreadable, f"world manifest {path}: no such file") from None
    except OSError as exc:
        raise AtollError(ErrorCode.artifact_unreadable, f"world manifest {path}: {exc}") from None
    return read_manifest(data, path)


def _blob_folders(
    fs: Any, path: str, manifest: WorldManifest, root: StoreRoot, *, depth: int
) -> list[BlobStore]:
    """The blob folders of ``manifest`` (at ``path``): its own ``blobs``, then its base's."""
    folders: list[BlobStore] = []
    if manifest.blobs is not None:
        resolved = resolve_reference(path, manifest.blobs, root.path, field="blobs")
        folders.append(BlobStore(root, folder=resolved[len(root.path) + 1 :]))
    if manifest.base is not None:
        if depth >= 1:
            raise _reference_error(f"{path}: a base may not have a base of its own")
        if manifest.base_digest is None:
            raise _reference_error(f"{path}: base {manifest.base!r} comes without base_digest")
        base_path = resolve_reference(path, manifest.base, root.path, field="base")
        if not base_path.endswith(MANIFEST_SUFFIX):
            raise _reference_error(f"{path}: base {manifest.base!r} is not a {MANIFEST_SUFFIX} file")
        base = _read_manifest(fs, base_path)
        if base.digest() != manifest.base_digest:
            raise AtollError(
                ErrorCode.world_base_mismatch,
                f"{path}: base {manifest.base!r} has digest {base.digest()}, not {manifest.base_digest}",
            )
        folders.extend(_blob_folders(fs, base_path, base, root, depth=depth + 1))
    return folders


def materialize(
    uri: str | Path, sink: BinaryIO, *, root: str | Path, storage_options: dict | None = None
) -> tuple[int, str]:
    """Write the full archive of the world at ``uri`` to ``sink``: for a manifest or delta, the
    deterministic archive (the bytes ``/data/snapshot`` gives for the same world); for a
    legacy archive, its bytes as stored. Returns (size, sha256) of what was written. Errors as
    :func:`open_world`, and AtollError(``blob_corrupt``/``blob_missing``) for a bad blob."""
    with open_world(uri, root=root, storage_options=storage_options) as world:
        if world.manifest is None:
            digest, size = hashlib.sha256(), 0
            with world.archive_path().open("rb") as source:
                while block := source.read(_CHUNK):
                    sink.write(block)
                    digest.update(block)
                    size += len(block)
            return size, digest.hexdigest()
        return write_archive(world.manifest, world.open_blob, sink)


def infer_root(location: str | Path, *, storage_options: dict | None = None) -> str:
    """The store root of a manifest or delta given without one: the nearest folder above it
    that holds ``blobs/``, else the file's own folder (where references can then point
    nowhere outside it)."""
    fs, path = open_location(location, storage_options)
    folder = posixpath.dirname(path)
    candidate = folder
    while candidate and candidate not in ("/", "."):
        if fs.isdir(f"{candidate}/blobs"):
            return f"{protocol_of(fs)}://{candidate}"
        parent = posixpath.dirname(candidate)
        if parent == candidate:
            break
        candidate = parent
    return f"{protocol_of(fs)}://{folder}"


def store_root_for(
    uri: str | Path, store_url: str | None = None, *, storage_options: dict | None = None
) -> str:
    """The store root to read the world at ``uri`` under: ``store_url`` (a run's artifact store)
    when ``uri`` lies under it, else :func:`infer_root`."""
    if store_url is not None:
        root = local_url(store_url).rstrip("/")
        if local_url(str(uri)).startswith(root + "/"):
            return root
    return infer_root(uri, storage_options=storage_options)


__all__ = [
    "BLOB_FOLDER",
    "DELTA_SUFFIX",
    "MANIFEST_SUFFIX",
    "BlobIntegrityError",
    "BlobStore",
    "ManifestError",
    "StoredWorld",
    "infer_root",
    "materialize",
    "open_world",
    "relative_reference",
    "resolve_reference",
    "seed_manifest_key",
    "store_root_for",
    "store_world",
    "world_kind",
]
