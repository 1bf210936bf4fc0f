"""The seed cache: each world (world zip + task overlay) extracted once per machine.

Several workers on one machine (``atoll worker`` processes, or ``atoll run`` beside a
worker) share ``OUTPUT/.cache/seeds/``. A seed is ``KEY/`` (``filesystem/`` and
``.apps_data/``), ``KEY.manifest.json`` (its manifest, :mod:`atoll.world_manifest`) and
``KEY.digest`` (the manifest's digest: what a freshly populated environment must
reproduce). The digest file is written last, by a rename: a seed whose digest file exists is
complete and is never changed or removed again, so trials can populate from it while other
processes come and go. Building takes ``KEY.lock`` (``flock``, so a crashed builder's lock
goes with its process), builds into a temporary folder beside the seed and renames it into
place; a seed left half-built by a crashed process (no digest file) is found under the lock
and rebuilt. ``KEY.tar.gz``, the seed's full archive, is written only when asked for
(:meth:`SeedCache.archive`: environments on other machines and trial pods are sent it),
under the same lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from atoll.benchmark import Benchmark
from atoll.trial import TrialSpec
from atoll.world_deltas import read_manifest
from atoll.world_manifest import Entry, WorldManifest


@dataclass(frozen=True)
class Seed:
    """A complete seed: its cache key, its extracted folder and its manifest."""

    key: str
    folder: Path
    manifest: WorldManifest

    @functools.cached_property
    def digest(self) -> str:
        return self.manifest.digest()

    def open_member(self, entry: Entry) -> BinaryIO:
        """A file of the seed, by its manifest entry (for storing its blob)."""
        return open(self.folder / entry.path, "rb")  # noqa: SIM115


class SeedCache:
    """Extracted world seeds (world zip + task overlay), one per (world, overlay) digest,
    with the sha256 of the snapshot a freshly populated environment must reproduce; safe to
    share between processes (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}
        self._seeds: dict[str, Seed] = {}

    async def get(self, spec: TrialSpec, benchmark: Benchmark) -> Seed:
        """The seed, building it if no process has yet."""
        key = seed_key(spec)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._seeds:
                self._seeds[key] = await asyncio.to_thread(self._ready, key, spec, benchmark)
        return self._seeds[key]

    async def archive(self, seed: Seed) -> Path:
        """The seed's full archive (``KEY.tar.gz``, the bytes ``/data/snapshot`` gives for it),
        written the first time it is asked for."""
        lock = self._locks.setdefault(seed.key, asyncio.Lock())
        async with lock:
            return await asyncio.to_thread(self._archive, seed)

    def _archive(self, seed: Seed) -> Path:
        path = self.root / f"{seed.key}.tar.gz"
        if path.is_file():
            return path
        from environment.populate import WorldRoots
        from environment.snapshot import write_snapshot

        with open(self.root / f"{seed.key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.is_file():
                return path
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            try:
                with open(partial, "wb") as sink:
                    write_snapshot(WorldRoots(seed.folder / "filesystem", seed.folder / ".apps_data"), sink)
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)
        return path

    def _ready(self, key: str, spec: TrialSpec, benchmark: Benchmark) -> Seed:
        seed = self._complete(key)
        if seed:
            return seed
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
            seed = self._complete(key)  # another process may have built it while we waited
            if seed is None:
                self._build(key, spec, benchmark)
                seed = self._complete(key)
            if seed is None:
                raise OSError(f"seed {key} in {self.root}: built, but not found complete")
            return seed

    def _complete(self, key: str) -> Seed | None:
        digest_file = self.root / f"{key}.digest"
        manifest_file = self.root / f"{key}.manifest.json"
        if not digest_file.is_file():
            return None
        if not (self.root / key).is_dir() or not manifest_file.is_file():
            return None  # removed by hand: rebuilt under the lock
        manifest = read_manifest(manifest_file.read_bytes(), str(manifest_file))
        if manifest.digest() != digest_file.read_text().strip():
            return None  # changed by hand: rebuilt under the lock
        return Seed(key, self.root / key, manifest)

    def _build(self, key: str, spec: TrialSpec, benchmark: Benchmark) -> None:
        """Build the seed beside its place and rename it in; called holding ``KEY.lock``."""
        from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
        from environment.snapshot import build_manifest

        folder = self.root / key
        # Holding the lock, no process is building this seed, and none uses a seed without
        # its digest file: whatever is left of it is a crashed build's, safe to remove.
        (self.root / f"{key}.digest").unlink(missing_ok=True)
        for leftover in [
            folder,
            self.root / f"{key}.tar.gz",
            self.root / f"{key}.sha256",  # the digest file of caches written before manifests
            *self.root.glob(f".{key}.*"),
        ]:
            _remove(leftover)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        try:
            roots = WorldRoots(staging / "filesystem", staging / ".apps_data")
            roots.fs_root.mkdir()
            roots.apps_data_root.mkdir()
            world = Subsystem.parse("world")
            sources = [
                PopulateSource(Subsystem.parse(subsystem), url=Path(path).as_uri())
                for subsystem, path in benchmark.world_sources(spec.world_id)
            ]
            overlay = benchmark.task_overlays.get(spec.task_id)
            if overlay:
                sources.append(PopulateSource(world, url=Path(overlay).as_uri()))
            populate(sources, roots, mode="merge")
            manifest = build_manifest(roots)
            _write_atomically(self.root / f"{key}.manifest.json", manifest.to_bytes())
            staging.rename(folder)
            _write_atomically(self.root / f"{key}.digest", manifest.digest().encode())
        finally:
            _remove(staging)


def seed_key(spec: TrialSpec) -> str:
    """The cache key of a trial's seed: its world and overlay digests."""
    return hashlib.sha256(f"{spec.world_digest}:{spec.overlay_digest}".encode()).hexdigest()[:24]


def _remove(folder: Path) -> None:
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    elif folder.exists() or folder.is_symlink():
        folder.unlink()


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


__all__ = ["Seed", "SeedCache", "seed_key"]
