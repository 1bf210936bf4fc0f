"""The seed cache: each world (world zip + task overlay) extracted once per machine.

Several workers on one machine (``atoll worker`` processes, or ``atoll run`` beside a
worker) share ``OUTPUT/.cache/seeds/``. A seed is ``KEY/`` (``filesystem/`` and
``.apps_data/``), ``KEY.tar.gz`` (its deterministic snapshot) and ``KEY.sha256`` (that
snapshot's digest). The digest file is written last, by a rename: a seed whose digest file
exists is complete and is never changed or removed again, so trials can populate from it
while other processes come and go. Building takes ``KEY.lock`` (``flock``, so a crashed
builder's lock goes with its process), builds into a temporary folder beside the seed and
renames it into place; a seed left half-built by a crashed process (no digest file) is
found under the lock and rebuilt.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from atoll.benchmark import Benchmark
from atoll.trial import TrialSpec


class SeedCache:
    """Extracted world seeds (world zip + task overlay), one per (world, overlay) digest,
    with the sha256 of the snapshot a freshly populated environment must reproduce; safe to
    share between processes (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}
        self._digests: dict[str, str] = {}

    async def get(self, spec: TrialSpec, benchmark: Benchmark) -> tuple[Path, str]:
        """The seed's folder and digest, building the seed if no process has yet."""
        key = seed_key(spec)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._digests:
                self._digests[key] = await asyncio.to_thread(self._ready, key, spec, benchmark)
        return self.root / key, self._digests[key]

    def snapshot_path(self, folder: Path) -> Path:
        return folder.parent / f"{folder.name}.tar.gz"

    def _ready(self, key: str, spec: TrialSpec, benchmark: Benchmark) -> str:
        digest = self._complete(key)
        if digest:
            return digest
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
            digest = self._complete(key)  # another process may have built it while we waited
            return digest or self._build(key, spec, benchmark)

    def _complete(self, key: str) -> str | None:
        digest_file = self.root / f"{key}.sha256"
        if not digest_file.is_file():
            return None
        if not (self.root / key).is_dir() or not (self.root / f"{key}.tar.gz").is_file():
            return None  # removed by hand: rebuilt under the lock
        return digest_file.read_text().strip() or None

    def _build(self, key: str, spec: TrialSpec, benchmark: Benchmark) -> str:
        """Build the seed beside its place and rename it in; called holding ``KEY.lock``."""
        from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
        from environment.snapshot import write_snapshot

        folder, archive = self.root / key, self.root / f"{key}.tar.gz"
        # Holding the lock, no process is building this seed, and none uses a seed without
        # its digest file: whatever is left of it is a crashed build's, safe to remove.
        (self.root / f"{key}.sha256").unlink(missing_ok=True)
        for leftover in [folder, *self.root.glob(f".{key}.*")]:
            _remove(leftover)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        staged_archive = staging.parent / f"{staging.name}.tar.gz"
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
            with open(staged_archive, "wb") as sink:
                info = write_snapshot(roots, sink)
            os.replace(staged_archive, archive)
            staging.rename(folder)
            _write_atomically(self.root / f"{key}.sha256", info.sha256)
            return info.sha256
        finally:
            _remove(staging)
            staged_archive.unlink(missing_ok=True)


def seed_key(spec: TrialSpec) -> str:
    """The cache key of a trial's seed: its world and overlay digests."""
    return hashlib.sha256(f"{spec.world_digest}:{spec.overlay_digest}".encode()).hexdigest()[:24]


def _remove(folder: Path) -> None:
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    elif folder.exists() or folder.is_symlink():
        folder.unlink()


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


__all__ = ["SeedCache", "seed_key"]
