"""Worlds set aside instead of deleted, for the next trial of the same seed.

:mod:`environment.world_keep` keeps the files a world already holds when it is laid again from
the folder it was laid from. But in a run the trials of one seed seldom follow each other in one
environment: the queue's order is random by design (trial ids are hashes, so a run cut short is
still a fair sample of its tasks), and a run of 480 tasks over 33 worlds hands an environment
the world it just held about one time in 33. So where the environments of one process share a
parking folder (``ATOLL_PARKED_WORLDS_DIR``; the local executor makes one in its scratch
folder), a replace populate from a local folder

- takes a world parked from that same folder, by whichever environment, and lets world_keep
  check it file by file exactly as it checks a world in place, against that world's own stat
  cache, which travels with it (a rename leaves the files' stat keys as they were);
- moves the world it replaces into the parking folder, with its stat cache, under the folder it
  was laid from, instead of deleting it;
- deletes the oldest parked worlds once they hold more than ``ATOLL_PARKED_WORLDS_MB``
  (allocated bytes).

A parked world is a previous trial's world, the agent's changes included: nothing of it is kept
that world_keep would not keep in place, and everything else is removed. Parking moves entries
by rename, so the parking folder must be on the world's filesystem; where it is not (a world
root mounted on its own), nothing is parked. Nothing is parked or taken while a ``code_exec``
call runs over the world (world_keep's rule).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from atoll.members import APPS_DATA, FILESYSTEM, RESERVED_PREFIX
from environment.populate import opened_dir
from environment.stat_cache import StatCache

TOPS = (FILESYSTEM, APPS_DATA)


@dataclass
class ParkedWorld:
    """A world moved aside: ``folder`` holds its ``filesystem/`` and ``.apps_data/``."""

    folder: Path
    source: str
    allocated: int
    cache: StatCache

    def root(self, top: str) -> Path:
        return self.folder / top


def _move_entries(source: Path, target: Path) -> None:
    """Every entry of ``source`` into ``target`` by rename (staging folders stay)."""
    with opened_dir(source) as source_fd, opened_dir(target) as target_fd:
        for name in os.listdir(source_fd):
            if not name.startswith(RESERVED_PREFIX):
                os.rename(name, name, src_dir_fd=source_fd, dst_dir_fd=target_fd)


def _allocated(folder: Path) -> int:
    total = 0
    for directory, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


class Parking:
    """One parking folder, shared by the environments of a process (:func:`parking_for`)."""

    def __init__(self, root: Path, limit_bytes: int) -> None:
        self.root = root
        self.limit_bytes = limit_bytes
        self._worlds: list[ParkedWorld] = []  # oldest first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._worlds)

    def take(self, source: str) -> ParkedWorld | None:
        """The world parked last from ``source``, no longer parked (give it back if unused)."""
        with self._lock:
            for index in range(len(self._worlds) - 1, -1, -1):
                if self._worlds[index].source == source:
                    return self._worlds.pop(index)
        return None

    def give_back(self, world: ParkedWorld) -> None:
        with self._lock:
            self._worlds.append(world)
        self._evict()

    def park(self, root_of: Callable[[str], Path], source: str, cache: StatCache) -> bool:
        """Move the world's entries here, with its cache's entries (the world's cache is left
        empty). False, with nothing moved, where the parking folder is on another filesystem."""
        self.root.mkdir(parents=True, exist_ok=True)
        if any(os.stat(root_of(top)).st_dev != os.stat(self.root).st_dev for top in TOPS):
            return False
        folder = Path(tempfile.mkdtemp(prefix="world-", dir=self.root))
        for top in TOPS:
            (folder / top).mkdir()
            _move_entries(root_of(top), folder / top)
        parked = ParkedWorld(folder, source, _allocated(folder), StatCache())
        parked.cache.swap(cache)
        self.give_back(parked)
        return True

    def unpark(self, world: ParkedWorld, root_of: Callable[[str], Path], cache: StatCache) -> None:
        """Move a taken world into the (emptied) world roots, its cache entries into ``cache``."""
        for top in TOPS:
            if world.root(top).is_dir():
                _move_entries(world.root(top), root_of(top))
        cache.swap(world.cache)
        shutil.rmtree(world.folder, ignore_errors=True)

    def _evict(self) -> None:
        gone: list[ParkedWorld] = []
        with self._lock:
            while self._worlds and sum(w.allocated for w in self._worlds) > self.limit_bytes:
                gone.append(self._worlds.pop(0))
        for world in gone:
            shutil.rmtree(world.folder, ignore_errors=True)

    def clear(self) -> None:
        with self._lock:
            gone, self._worlds = self._worlds, []
        for world in gone:
            shutil.rmtree(world.folder, ignore_errors=True)


_PARKINGS: dict[Path, Parking] = {}
_PARKINGS_LOCK = threading.Lock()


def parking_for(root: Path, limit_bytes: int) -> Parking:
    """The process's parking of ``root`` (one per folder, so environments share it)."""
    key = root.resolve()
    with _PARKINGS_LOCK:
        parking = _PARKINGS.get(key)
        if parking is None:
            parking = _PARKINGS[key] = Parking(key, limit_bytes)
        parking.limit_bytes = limit_bytes
        return parking
