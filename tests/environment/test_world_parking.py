"""Replaced worlds are parked for the next trial of their seed, whichever environment runs it
(environment.world_parking): that trial's world is still exactly a fresh lay's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from atoll.errors import AtollError
from environment.archive import UnsafeArchive
from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
from environment.snapshot import SnapshotLimits
from environment.stat_cache import wait_for_clock_tick
from environment.world_delta import WorldState, list_populated
from environment.world_keep import KeepRequest
from environment.world_parking import Parking
from mcp_servers.code import runs
from mcp_servers.code.cgroup import CgroupLimits
from tests.environment.test_world_keep import SIZE, _described, _roots, _seed


def _lay(roots: WorldRoots, seed: Path, state: WorldState, parking: Parking) -> int:
    """Populate as the route does, with the parking; the files kept."""
    keep = KeepRequest(state.cache, SnapshotLimits(), parking, state.laid_from)
    result = populate(
        [PopulateSource(Subsystem.parse("world"), url=seed.as_uri())], roots, mode="replace", keep=keep
    )
    state.laid_from = result.details["laid_from"]
    list_populated(roots, state, SnapshotLimits())
    return int(result.details["kept_files"])


def _inodes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_ino for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def seeds(tmp_path: Path) -> tuple[Path, Path]:
    other = _seed(tmp_path / "other")
    (other / "filesystem/report.txt").write_bytes(b"o" * SIZE)  # same name, other bytes
    (other / "filesystem/other-only.txt").write_text("other")
    wait_for_clock_tick()
    return _seed(tmp_path / "seed"), other


@pytest.fixture
def parking(tmp_path: Path) -> Parking:
    return Parking(tmp_path / "parked", 1 << 30)


@pytest.fixture
def fresh(tmp_path: Path, seeds: tuple[Path, Path]) -> dict[str, tuple]:
    roots = _roots(tmp_path / "fresh")
    populate([PopulateSource(Subsystem.parse("world"), url=seeds[0].as_uri())], roots, mode="replace")
    return _described(roots)


def test_a_world_parked_by_one_environment_is_laid_again_by_another(tmp_path, seeds, parking, fresh):
    seed, other = seeds
    first, second = _roots(tmp_path / "one"), _roots(tmp_path / "two")
    one, two = WorldState(), WorldState()
    assert _lay(first, seed, one, parking) == 0
    laid = _inodes(first.fs_root)
    wait_for_clock_tick()
    assert _lay(first, other, one, parking) == 0  # the seed's world is parked, not deleted
    assert len(parking) == 1
    assert _lay(second, seed, two, parking) == 5  # taken by the other environment
    assert _inodes(second.fs_root) == laid
    assert _described(second) == fresh
    assert len(parking) == 0 and not any((tmp_path / "parked").iterdir())


def test_what_the_agent_did_to_a_parked_world_does_not_survive(tmp_path, seeds, parking, fresh):
    seed, other = seeds
    first, second = _roots(tmp_path / "one"), _roots(tmp_path / "two")
    one, two = WorldState(), WorldState()
    _lay(first, seed, one, parking)
    report = first.fs_root / "report.txt"
    before = report.stat()
    report.write_bytes(b"x" * SIZE)
    os.utime(report, ns=(before.st_atime_ns, before.st_mtime_ns))
    (first.fs_root / "deals/added.txt").write_text("mine")
    (first.fs_root / "run.sh").chmod(0o700)
    wait_for_clock_tick()
    _lay(first, other, one, parking)
    assert _lay(second, seed, two, parking) == 4  # all but the rewritten report
    assert _described(second) == fresh


def test_the_oldest_parked_worlds_go_past_the_limit(tmp_path, seeds):
    seed, other = seeds
    parking = Parking(tmp_path / "parked", 1)  # any world is over it
    roots, state = _roots(tmp_path / "one"), WorldState()
    _lay(roots, seed, state, parking)
    _lay(roots, other, state, parking)
    assert len(parking) == 0 and not any((tmp_path / "parked").iterdir())
    assert _lay(roots, seed, state, parking) == 0


def test_a_failed_populate_gives_the_parked_world_back_and_leaves_the_world(tmp_path, seeds, parking):
    seed, other = seeds
    roots, state = _roots(tmp_path / "one"), WorldState()
    _lay(roots, seed, state, parking)
    _lay(roots, other, state, parking)
    before = _described(roots)
    os.mkfifo(seed / "filesystem/fifo")  # the seed folder is now refused
    with pytest.raises(UnsafeArchive):
        _lay(roots, seed, state, parking)
    assert _described(roots) == before
    assert len(parking) == 1
    (seed / "filesystem/fifo").unlink()
    assert _lay(roots, seed, state, parking) == 5


@pytest.mark.skipif(
    not Path("/dev/shm").is_dir() or os.stat("/dev/shm").st_dev == os.stat(Path.cwd()).st_dev,
    reason="needs a second filesystem",
)
def test_a_parking_on_another_filesystem_parks_nothing(tmp_path, seeds, fresh):
    """Parking moves by rename; across filesystems the world is deleted as before."""
    seed, other = seeds
    shm = Path(os.environ.get("TMPDIR_SHM", "/dev/shm")) / f"atoll-parking-{os.getpid()}"
    parking = Parking(shm, 1 << 30)
    try:
        roots, state = _roots(tmp_path / "one"), WorldState()
        if os.stat(tmp_path).st_dev == os.stat("/dev/shm").st_dev:
            pytest.skip("the test's folder is on /dev/shm too")
        _lay(roots, seed, state, parking)
        _lay(roots, other, state, parking)
        assert len(parking) == 0
        assert _lay(roots, seed, state, parking) == 0
        assert _described(roots) == fresh
    finally:
        parking.clear()


def test_nothing_is_parked_while_a_code_call_runs_over_the_world(tmp_path, seeds, parking):
    seed, other = seeds
    roots, state = _roots(tmp_path / "one"), WorldState()
    _lay(roots, seed, state, parking)
    try:
        with runs.run_for(roots.fs_root, None, CgroupLimits(256 * 1024**2, 64, 100)):
            _lay(roots, other, state, parking)
    finally:
        runs.close_idle_runs()
    assert len(parking) == 0
    assert state.laid_from is None  # laid without keeping: nothing to park it under next time


def test_a_merge_or_an_archive_never_parks_or_takes(tmp_path, seeds, parking):
    seed, other = seeds
    roots, state = _roots(tmp_path / "one"), WorldState()
    _lay(roots, seed, state, parking)
    _lay(roots, other, state, parking)
    keep = KeepRequest(state.cache, SnapshotLimits(), parking, state.laid_from)
    with pytest.raises(AtollError):  # a folder given as an archive URL: refused, nothing moved
        populate(
            [PopulateSource(Subsystem.parse("world"), url=(seed / "nope.zip").as_uri())],
            roots,
            mode="replace",
            keep=keep,
        )
    populate([PopulateSource(Subsystem.parse("world"), url=seed.as_uri())], roots, mode="merge", keep=keep)
    assert len(parking) == 1
