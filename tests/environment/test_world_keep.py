"""A replace populate from a local folder keeps the world files that already hold what it
would lay (environment.world_keep): the world afterwards is the one a fresh lay gives, and an
agent's change, however disguised, never survives into the next trial's world."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import httpx
import pytest

from environment import EnvironmentServer
from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
from environment.snapshot import SnapshotLimits, build_manifest
from environment.stat_cache import wait_for_clock_tick
from environment.world_delta import WorldState, list_populated
from environment.world_keep import KeepRequest
from mcp_servers.code import runs
from mcp_servers.code.cgroup import CgroupLimits
from tests.environment.factories import make_test_server, world_settings

SIZE = 4096


def _seed(base: Path) -> Path:
    files = {
        "filesystem/report.txt": b"r" * SIZE,
        "filesystem/deals/model.csv": b"a,b\n1,2\n",
        "filesystem/deals/deep/notes.md": b"# notes\n",
        "filesystem/run.sh": b"#!/bin/sh\necho hi\n",
        ".apps_data/mail/inbox.mbox": b"From x\n\nhi\n",
    }
    for name, data in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (1_600_000_000.5, 1_600_000_000.5))
    (base / "filesystem/run.sh").chmod(0o755)
    (base / "filesystem/empty").mkdir()
    wait_for_clock_tick()  # a seed is written long before it is laid: its hashes are kept
    return base


def _roots(base: Path) -> WorldRoots:
    roots = WorldRoots(base / "filesystem", base / ".apps_data")
    roots.fs_root.mkdir(parents=True)
    roots.apps_data_root.mkdir(parents=True)
    return roots


def _lay(roots: WorldRoots, seed: Path, state: WorldState | None) -> int:
    """Populate as the route does (keeping when ``state`` is given); the files kept."""
    keep = None if state is None else KeepRequest(state.cache, SnapshotLimits())
    result = populate(
        [PopulateSource(Subsystem.parse("world"), url=seed.as_uri())], roots, mode="replace", keep=keep
    )
    if state is not None:
        list_populated(roots, state, SnapshotLimits())
    return int(result.details["kept_files"])


def _described(roots: WorldRoots) -> dict[str, tuple]:
    """Every entry of both trees: type, mode, owner, mtime and content."""
    found: dict[str, tuple] = {}
    for top in (roots.fs_root, roots.apps_data_root):
        for path in sorted(top.rglob("*")):
            info = path.lstat()
            content = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
            mtime = info.st_mtime_ns if stat.S_ISREG(info.st_mode) else None
            found[f"{top.name}/{path.relative_to(top)}"] = (
                stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, mtime, content,
                os.listxattr(path, follow_symlinks=False) if not stat.S_ISLNK(info.st_mode) else [],
            )  # fmt: skip
    return found


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return _seed(tmp_path / "seed")


@pytest.fixture
def fresh(tmp_path: Path, seed: Path) -> dict[str, tuple]:
    """What a fresh lay of the seed gives, in a world of its own."""
    roots = _roots(tmp_path / "fresh")
    _lay(roots, seed, None)
    return _described(roots)


@pytest.fixture
def world(tmp_path: Path, seed: Path) -> tuple[WorldRoots, WorldState]:
    roots = _roots(tmp_path / "world")
    state = WorldState()
    assert _lay(roots, seed, state) == 0  # an empty world has nothing to keep
    return roots, state


def test_an_unchanged_world_is_kept_file_for_file(world, seed, fresh):
    roots, state = world
    before = {p: p.stat().st_ino for p in roots.fs_root.rglob("*") if p.is_file()}
    assert _lay(roots, seed, state) == 5
    assert {p: p.stat().st_ino for p in roots.fs_root.rglob("*") if p.is_file()} == before
    assert _described(roots) == fresh
    assert build_manifest(roots, SnapshotLimits()).digest() == state.populated_digest


def test_what_an_agent_changed_is_laid_again_and_what_it_added_is_removed(world, seed, fresh):
    roots, state = world
    (roots.fs_root / "deals/model.csv").write_bytes(b"a,b\n9,9\n")  # same size
    (roots.fs_root / "added.txt").write_text("mine")
    (roots.fs_root / "deals/deep/more").mkdir()
    (roots.apps_data_root / "mail/inbox.mbox").unlink()
    assert _lay(roots, seed, state) == 3  # report, notes, run.sh
    assert _described(roots) == fresh


def test_a_same_size_rewrite_with_its_mtime_set_back_is_not_kept(world, seed, fresh):
    """An agent can put mtime back with utime; only ctime (and the hash) give it away."""
    roots, state = world
    path = roots.fs_root / "report.txt"
    before = path.stat()
    path.write_bytes(b"x" * SIZE)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _lay(roots, seed, state) == 4
    assert path.read_bytes() == b"r" * SIZE
    assert _described(roots) == fresh


def test_a_file_rewritten_after_the_cache_last_saw_it_is_hashed_again(world, seed, fresh):
    """The cache holds the hash of the populated file; the rewrite moves ctime, so the world
    file is hashed again rather than trusted."""
    roots, state = world
    path = roots.fs_root / "deals/deep/notes.md"
    path.write_bytes(b"# NOTES\n")
    assert _lay(roots, seed, state) == 4
    assert _described(roots) == fresh


def test_mode_mtime_and_owner_are_those_of_a_fresh_copy(world, seed, fresh):
    roots, state = world
    (roots.fs_root / "report.txt").chmod(0o600)
    (roots.fs_root / "run.sh").chmod(0o700)
    os.utime(roots.fs_root / "deals/model.csv", (1, 1))
    (roots.fs_root / "deals").chmod(0o700)
    if os.geteuid() == 0:  # the code server hands world files to the sandbox user
        os.chown(roots.fs_root / "deals/deep/notes.md", 12345, 12345)
        os.chown(roots.fs_root / "deals/deep", 12345, 12345)
    wait_for_clock_tick()  # else the changed files are racily clean: hashed, never trusted
    assert _lay(roots, seed, state) == 5  # same bytes: kept, attributes reset
    assert _described(roots) == fresh


def test_a_file_with_a_second_link_or_extended_attributes_or_in_such_a_folder_is_laid_again(
    world, seed, fresh
):
    roots, state = world
    os.link(roots.fs_root / "report.txt", roots.fs_root / "deals/alias.txt")
    os.setxattr(roots.fs_root / "deals/model.csv", "user.tag", b"agent")
    os.setxattr(roots.fs_root / "deals/deep", "user.tag", b"agent")  # a folder (a default ACL, say)
    assert _lay(roots, seed, state) == 2  # run.sh and the mailbox
    assert _described(roots) == fresh


def test_a_folder_swapped_for_a_symlink_is_never_walked_through(world, seed, fresh, tmp_path):
    """``deals`` becomes a link to a copy of itself outside the world: nothing there is kept,
    touched or removed, and the world gets a real folder again."""
    roots, state = world
    outside = tmp_path / "outside"
    (roots.fs_root / "deals").rename(outside)
    (roots.fs_root / "deals").symlink_to(outside)
    outside_before = {p.name: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    assert _lay(roots, seed, state) == 3
    assert _described(roots) == fresh
    assert {p.name: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == outside_before


def test_a_changed_seed_file_reaches_the_world(world, seed, fresh):
    """The seed's hash is trusted only while its stat is unchanged."""
    roots, state = world
    assert _lay(roots, seed, state) == 5  # the seed's hashes are now known
    path = seed / "filesystem/report.txt"
    path.write_bytes(b"s" * SIZE)
    os.utime(path, (1_600_000_000.5, 1_600_000_000.5))
    assert _lay(roots, seed, state) == 4
    assert (roots.fs_root / "report.txt").read_bytes() == b"s" * SIZE


def test_nothing_is_kept_while_a_code_call_runs_over_the_world(world, seed):
    """A process of the previous trial's sandbox could still write through a descriptor."""
    roots, state = world
    inode = (roots.fs_root / "report.txt").stat().st_ino
    try:
        with runs.run_for(roots.fs_root, None, CgroupLimits(256 * 1024**2, 64, 100)):
            assert runs.calls_in_flight(roots.fs_root) == 1
            assert _lay(roots, seed, state) == 0
    finally:
        runs.close_idle_runs()
    assert (roots.fs_root / "report.txt").stat().st_ino != inode
    assert _lay(roots, seed, state) == 5


def test_a_later_member_of_the_same_name_wins_over_a_kept_one(world, seed, tmp_path):
    """Keeping decides per member; a merge populate never keeps."""
    roots, state = world
    other = tmp_path / "other"
    (other / "filesystem").mkdir(parents=True)
    (other / "filesystem/report.txt").write_bytes(b"o")
    result = populate(
        [PopulateSource(Subsystem.parse("world"), url=other.as_uri())],
        roots,
        mode="merge",
        keep=KeepRequest(state.cache, SnapshotLimits()),
    )
    assert result.details["kept_files"] == 0
    assert (roots.fs_root / "report.txt").read_bytes() == b"o"
    assert (roots.fs_root / "deals/model.csv").exists()


def _archive_members(data: bytes) -> list[tuple]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return [
            (m.name, m.type, m.mode, m.mtime, archive.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
            for m in archive.getmembers()
        ]


@pytest.mark.parametrize("keep", [True, False])
def test_the_service_keeps_unless_told_not_to_and_its_snapshot_is_a_fresh_worlds(tmp_path, seed, keep):
    """Over HTTP: the reply counts kept files as populated, ``ATOLL_KEEP_UNCHANGED_FILES=false``
    lays every file again, and either way the snapshot archive is the fresh world's."""
    settings = world_settings(tmp_path / "world", keep_unchanged_files=keep)
    with (
        EnvironmentServer(settings, server_factory=make_test_server) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        replies, snapshots, inodes = [], [], []
        for _ in range(2):
            reply = client.post(
                "/data/populate",
                json={"sources": [{"url": seed.as_uri(), "subsystem": "world"}], "mode": "replace"},
            )
            assert reply.status_code == 200, reply.text
            replies.append(reply.json())
            inodes.append((settings.fs_root / "report.txt").stat().st_ino)
            snapshot = client.post("/data/snapshot")
            assert snapshot.status_code == 200, snapshot.text
            snapshots.append(_archive_members(snapshot.content))
    assert replies[0]["objects_added"] == replies[1]["objects_added"] == 5
    assert replies[0]["extracted_bytes"] == replies[1]["extracted_bytes"]
    assert (inodes[0] == inodes[1]) is keep
    assert snapshots[0] == snapshots[1]
