"""Environments sharing a process take turns at their heavy world work (atoll.runtime's world
lane): populate from local files and listing a world wait while another world's work holds the
lane; an upload, which waits on its sender, never does; and a process with no shared lane
never waits at all."""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from atoll import runtime
from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
from environment.snapshot import build_manifest

WAIT_S = 0.5  # how long an operation that must wait is watched not finishing


@pytest.fixture
def no_shared_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane off, whatever an earlier test in this process left sharing it (a local executor
    it did not close); put back as it was afterwards."""
    monkeypatch.setattr(runtime, "_world_lane_users", 0)


@pytest.fixture
def shared_lane(no_shared_lane: None) -> Iterator[None]:
    runtime.share_world_lane()
    try:
        yield
    finally:
        runtime.end_world_lane()


def _roots(base: Path) -> WorldRoots:
    roots = WorldRoots(base / "filesystem", base / ".apps_data")
    roots.fs_root.mkdir(parents=True)
    roots.apps_data_root.mkdir(parents=True)
    return roots


def _seed(base: Path) -> Path:
    for index in range(20):
        path = base / "filesystem" / f"file{index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content {index}\n")
    return base


def _tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"uploaded\n"
        member = tarfile.TarInfo("filesystem/upload.txt")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _finishes_only_after_the_lane_is_free(operation: Callable[[], object]) -> None:
    """Run ``operation`` on a thread while this thread holds the lane: it must not finish until
    the lane is given back, and then it must."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            operation()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failure.append(exc)
        finally:
            done.set()

    with runtime.world_work():
        worker = threading.Thread(target=run)
        worker.start()
        assert not done.wait(WAIT_S), "ran while another world's work held the lane"
    assert done.wait(30), "never ran after the lane was free"
    worker.join()
    assert failure == []


def _finishes_while_the_lane_is_held(operation: Callable[[], object]) -> None:
    with runtime.world_work():
        outcome: list[object] = []
        worker = threading.Thread(target=lambda: outcome.append(operation()))
        worker.start()
        worker.join(30)
        assert outcome, "waited for the lane"


def test_a_local_populate_waits_for_the_lane(tmp_path, shared_lane):
    seed, roots = _seed(tmp_path / "seed"), _roots(tmp_path / "world")
    _finishes_only_after_the_lane_is_free(
        lambda: populate([PopulateSource(Subsystem.parse("world"), url=seed.as_uri())], roots, mode="replace")
    )
    assert sorted(path.name for path in roots.fs_root.iterdir()) == sorted(f"file{i}.txt" for i in range(20))


def test_listing_a_world_waits_for_the_lane(tmp_path, shared_lane):
    roots = _roots(tmp_path / "world")
    (roots.fs_root / "a.txt").write_text("a")
    _finishes_only_after_the_lane_is_free(lambda: build_manifest(roots))


def test_an_upload_does_not_hold_or_wait_for_the_lane(tmp_path, shared_lane):
    """An uploaded archive is read as its sender sends it: a slow sender must not hold up the
    other worlds, so an upload never takes the lane."""
    roots = _roots(tmp_path / "world")
    _finishes_while_the_lane_is_held(
        lambda: populate([PopulateSource(Subsystem.parse("world"), file=io.BytesIO(_tar()))], roots)
    )
    assert (roots.fs_root / "upload.txt").read_text() == "uploaded\n"


def test_without_a_shared_lane_nothing_waits(tmp_path, no_shared_lane):
    """A service with its one environment: world work never waits on the lane."""
    seed, roots = _seed(tmp_path / "seed"), _roots(tmp_path / "world")
    _finishes_while_the_lane_is_held(
        lambda: populate([PopulateSource(Subsystem.parse("world"), url=seed.as_uri())], roots, mode="replace")
    )
    _finishes_while_the_lane_is_held(lambda: build_manifest(roots))


def test_the_lane_is_shared_until_every_sharer_ends(no_shared_lane):
    assert not runtime.world_lane_shared()
    runtime.share_world_lane()
    runtime.share_world_lane()
    runtime.end_world_lane()
    assert runtime.world_lane_shared()
    runtime.end_world_lane()
    assert not runtime.world_lane_shared()
    runtime.end_world_lane()  # one end too many is harmless
    assert not runtime.world_lane_shared()
