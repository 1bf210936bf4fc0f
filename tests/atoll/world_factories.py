"""Small builders for stored worlds: a world folder, its snapshot, its manifest and blobs,
a stored seed and a trial's delta on top of it."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from atoll.world_deltas import write_delta
from atoll.world_manifest import Entry, WorldManifest
from atoll.world_store import relative_reference, seed_manifest_key, store_world
from environment.populate import WorldRoots
from environment.snapshot import write_snapshot


def make_world(folder: Path, files: dict[str, bytes | str]) -> WorldRoots:
    """A world folder with ``filesystem/`` and ``.apps_data/`` holding ``files`` (member paths)."""
    roots = WorldRoots(folder / "filesystem", folder / ".apps_data")
    roots.fs_root.mkdir(parents=True, exist_ok=True)
    roots.apps_data_root.mkdir(parents=True, exist_ok=True)
    for member, content in files.items():
        path = folder / member
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return roots


def snapshot_bytes(roots: WorldRoots) -> bytes:
    """The world's archive, as the environment's ``/data/snapshot`` writes it."""
    sink = io.BytesIO()
    write_snapshot(roots, sink)
    return sink.getvalue()


def manifest_of(archive: bytes) -> tuple[WorldManifest, dict[str, bytes]]:
    """The manifest of a snapshot archive and its blobs by sha256."""
    entries, blobs = [], {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if member.isdir():
                entries.append(Entry(path=member.name, type="dir"))
                continue
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            digest = hashlib.sha256(data).hexdigest()
            blobs[digest] = data
            entries.append(
                Entry(
                    path=member.name,
                    type="file",
                    size=len(data),
                    sha256=digest,
                    executable=bool(member.mode & 0o100),
                )
            )
    return WorldManifest(entries=entries), blobs


def store_seed(store: object, name: str, archive: bytes) -> tuple[str, WorldManifest]:
    """Store a world archive as seed ``name``; (its manifest URI, its manifest)."""
    manifest, blobs = manifest_of(archive)
    uri = store_world(store, seed_manifest_key(name), manifest, lambda e: io.BytesIO(blobs[e.sha256]))  # type: ignore[arg-type]
    return uri, manifest


def delta_bytes(
    after: bytes,
    base: WorldManifest,
    *,
    delta_key: str,
    base_key: str,
    base_ref: str | None = None,
    base_digest: str | None = None,
) -> bytes:
    """A trial's delta: the after-world's manifest on ``base`` (stored at ``base_key``, named
    from ``delta_key``) and the blobs the base lacks. ``base_ref``/``base_digest`` override
    what it names (to craft bad deltas)."""
    manifest, blobs = manifest_of(after)
    manifest = manifest.model_copy(
        update={
            "base": base_ref if base_ref is not None else relative_reference(delta_key, base_key),
            "base_digest": base_digest or base.digest(),
        }
    )
    missing = sorted(manifest.hashes() - base.hashes())
    sink = io.BytesIO()
    write_delta(manifest, [(sha, io.BytesIO(blobs[sha]), len(blobs[sha])) for sha in missing], sink)
    return sink.getvalue()
