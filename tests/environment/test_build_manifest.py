"""build_manifest and the stat cache: the manifest lists exactly what the snapshot archives
(the archive rebuilt from it is the snapshot, byte for byte), and a file is hashed again
exactly when its stat says it may have changed."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

import environment.stat_cache as stat_cache
from atoll.world_deltas import write_archive
from atoll.world_manifest import Entry, WorldManifest
from environment.populate import WorldRoots
from environment.snapshot import (
    SnapshotLimits,
    SnapshotTooLarge,
    StatCache,
    UnlistableMember,
    build_manifest,
    write_snapshot,
)
from environment.stat_cache import wait_for_clock_tick

MiB = 1024**2


def _roots(base: Path) -> WorldRoots:
    return WorldRoots(base / "filesystem", base / ".apps_data")


def _hostile_world(base: Path) -> WorldRoots:
    """Nested and empty folders, unicode and PAX-long names, executables, .apps_data, a sparse
    file, and symlinks: to a file inside (stored as that file), to a folder inside, to a file
    outside, dangling (all three left out)."""
    roots = _roots(base)
    fs = roots.fs_root
    (fs / "Reports" / "Q1").mkdir(parents=True)
    (fs / "Reports" / "Q1" / "deck.pptx").write_bytes(os.urandom(70_000))
    (fs / "Reports" / "Überblick – 2024.md").write_text("# Übersicht ✓\n")
    (fs / "bin").mkdir()
    (fs / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (fs / "bin" / "run.sh").chmod(0o755)
    long_dir = fs / ("long-" + "x" * 120) / ("deeper-" + "y" * 110)
    long_dir.mkdir(parents=True)
    (long_dir / ("file-" + "z" * 100 + ".csv")).write_text("a,b\n1,2\n")
    (fs / "empty" / "also empty").mkdir(parents=True)
    with (fs / "sparse.bin").open("wb") as handle:
        handle.write(b"head")
        handle.seek(3 * MiB)
        handle.write(b"middle")
        handle.truncate(5 * MiB)  # a hole at the end too
    (fs / "inside-link.txt").symlink_to("Reports/Überblick – 2024.md")
    (fs / "folder-link").symlink_to("Reports")
    secret = base / "secret.txt"
    secret.write_text("host secret")
    (fs / "outside-link.txt").symlink_to(secret)
    (fs / "dangling").symlink_to("nowhere")
    (roots.apps_data_root / "mail").mkdir(parents=True)
    (roots.apps_data_root / "mail" / "sent.mbox").write_text("From x\n\nbody\n")
    (roots.apps_data_root / "calendar").mkdir()
    return roots


def _open_content(roots: WorldRoots):
    def open_blob(entry: Entry) -> io.BufferedReader:
        top, _, rest = entry.path.partition("/")
        return (roots.root(top) / rest).open("rb")  # a symlink member: what it leads to

    return open_blob


def _rebuilt(manifest: WorldManifest, roots: WorldRoots) -> bytes:
    sink = io.BytesIO()
    write_archive(manifest, _open_content(roots), sink)
    return sink.getvalue()


def _snapshot(roots: WorldRoots) -> bytes:
    sink = io.BytesIO()
    write_snapshot(roots, sink)
    return sink.getvalue()


def test_the_archive_rebuilt_from_the_manifest_is_the_snapshot_byte_for_byte(tmp_path):
    roots = _hostile_world(tmp_path)
    manifest = build_manifest(roots)

    assert _rebuilt(manifest, roots) == _snapshot(roots)
    paths = [entry.path for entry in manifest.entries]
    assert paths[0] == "filesystem" and ".apps_data" in paths
    assert "filesystem/inside-link.txt" in paths and "filesystem/empty/also empty" in paths
    for left_out in ("filesystem/outside-link.txt", "filesystem/folder-link", "filesystem/dangling"):
        assert left_out not in paths
    files = manifest.files()
    assert files["filesystem/bin/run.sh"].executable and not files["filesystem/sparse.bin"].executable
    assert files["filesystem/sparse.bin"].size == 5 * MiB
    assert (
        files["filesystem/inside-link.txt"].sha256 == files["filesystem/Reports/Überblick – 2024.md"].sha256
    )


def test_a_missing_root_is_an_empty_tree_in_both(tmp_path):
    roots = _roots(tmp_path)
    roots.fs_root.mkdir()
    (roots.fs_root / "a.txt").write_text("a")
    manifest = build_manifest(roots)
    assert [entry.path for entry in manifest.entries] == ["filesystem", "filesystem/a.txt", ".apps_data"]
    assert _rebuilt(manifest, roots) == _snapshot(roots)


def test_a_name_a_manifest_cannot_carry_is_refused_naming_it(tmp_path):
    roots = _roots(tmp_path)
    roots.fs_root.mkdir()
    (roots.fs_root / "back\\slash.txt").write_text("x")  # archived by the snapshot as it is
    assert _snapshot(roots)
    with pytest.raises(UnlistableMember) as refused:
        build_manifest(roots)
    assert refused.value.code == "world_not_manifestable" and "back\\\\slash.txt" in refused.value.message


def test_the_manifest_meets_the_snapshot_limits(tmp_path):
    roots = _hostile_world(tmp_path)
    with pytest.raises(SnapshotTooLarge):
        build_manifest(roots, SnapshotLimits(max_bytes=MiB))
    with pytest.raises(SnapshotTooLarge, match="sparse"):
        build_manifest(roots, SnapshotLimits(max_sparse_bytes=MiB))


# -- the stat cache ---------------------------------------------------------------------------


def _cached_world(tmp_path: Path) -> tuple[WorldRoots, StatCache, WorldManifest]:
    roots = _hostile_world(tmp_path)
    wait_for_clock_tick()  # the files' ctimes are past: their hashes are kept
    cache = StatCache()
    manifest = build_manifest(roots, cache=cache)
    return roots, cache, manifest


def test_an_unchanged_world_is_listed_again_without_reading_a_file(tmp_path):
    roots, cache, first = _cached_world(tmp_path)
    hashed = cache.hashed
    assert hashed == len(first.files()) and len(cache) == hashed

    again = build_manifest(roots, cache=cache)
    assert again == first and cache.hashed == hashed


def test_an_unchanged_file_is_not_even_opened(tmp_path, monkeypatch):
    """The walk's own stat finds an unchanged file in the cache: a listing of an unchanged world
    opens no file (two listings a trial, of every file of the world)."""
    roots, cache, first = _cached_world(tmp_path)
    opened: list[str] = []
    open_member = stat_cache.open_member

    def counted(root_fd, member):
        opened.append(member.member)
        return open_member(root_fd, member)

    monkeypatch.setattr(stat_cache, "open_member", counted)
    assert build_manifest(roots, cache=cache) == first and opened == []
    (roots.fs_root / "Reports" / "Q1" / "deck.pptx").write_bytes(b"rewritten")
    build_manifest(roots, cache=cache)
    assert opened == ["filesystem/Reports/Q1/deck.pptx"]


def test_a_changed_file_is_hashed_again_and_a_deleted_one_forgotten(tmp_path):
    roots, cache, first = _cached_world(tmp_path)
    hashed = cache.hashed
    (roots.fs_root / "Reports" / "Q1" / "deck.pptx").write_bytes(b"rewritten")
    (roots.apps_data_root / "mail" / "sent.mbox").unlink()

    second = build_manifest(roots, cache=cache)
    assert cache.hashed == hashed + 1
    assert second.files()["filesystem/Reports/Q1/deck.pptx"].size == len(b"rewritten")
    assert ".apps_data/mail/sent.mbox" not in second.files() and len(cache) == len(second.files())
    assert _rebuilt(second, roots) == _snapshot(roots)


def test_rewriting_a_file_with_the_same_size_and_setting_mtime_back_does_not_fool_the_cache(tmp_path):
    # ctime is the part of the key an agent cannot set back: without it this rewrite is unseen.
    roots, cache, first = _cached_world(tmp_path)
    target = roots.fs_root / "Reports" / "Q1" / "deck.pptx"
    before = os.stat(target)
    time.sleep(0.05)  # a later tick of the clock that stamps ctime
    with target.open("r+b") as handle:  # the same inode, the same size
        handle.write(b"\xff" * 16)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(target)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )

    second = build_manifest(roots, cache=cache)
    assert (
        second.files()["filesystem/Reports/Q1/deck.pptx"].sha256
        != first.files()["filesystem/Reports/Q1/deck.pptx"].sha256
    )
    assert _rebuilt(second, roots) == _snapshot(roots)


def test_a_file_stamped_in_the_current_clock_tick_is_not_kept(tmp_path, monkeypatch):
    # Racily clean: a write later in the same tick would keep the ctime, so such a hash is
    # not kept. Here the coarse clock never passes the files' ctimes.
    roots = _hostile_world(tmp_path)
    monkeypatch.setattr(stat_cache, "coarse_now_ns", lambda: 0)
    cache = StatCache()
    build_manifest(roots, cache=cache)
    assert len(cache) == 0
    hashed = cache.hashed
    build_manifest(roots, cache=cache)
    assert cache.hashed == 2 * hashed


def test_a_cached_sparse_file_still_counts_against_the_hole_cap(tmp_path):
    roots, cache, _ = _cached_world(tmp_path)
    with pytest.raises(SnapshotTooLarge, match="sparse"):
        build_manifest(roots, SnapshotLimits(max_sparse_bytes=MiB), cache=cache)


def test_a_symlink_swapped_to_point_outside_is_not_followed_even_when_cached(tmp_path):
    roots, cache, first = _cached_world(tmp_path)
    assert "filesystem/inside-link.txt" in first.files()
    link = roots.fs_root / "inside-link.txt"
    link.unlink()
    link.symlink_to(tmp_path / "secret.txt")
    second = build_manifest(roots, cache=cache)
    assert "filesystem/inside-link.txt" not in second.files()
    assert _rebuilt(second, roots) == _snapshot(roots)


# -- hashing a file as the snapshot copies it ---------------------------------------------------


def test_the_hasher_hashes_holes_as_the_zeros_the_archive_stores(tmp_path):
    from environment.world_walk import Budget, copy_data

    path = tmp_path / "sparse.bin"
    with path.open("wb") as handle:
        handle.seek(2 * MiB)
        handle.write(b"data")
        handle.truncate(3 * MiB)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        hasher = stat_cache._Hasher()  # noqa: SLF001
        size, holes = copy_data(descriptor, hasher, "filesystem/sparse.bin", Budget(SnapshotLimits()))
    finally:
        os.close(descriptor)
    assert (hasher.size, hasher.digest.hexdigest()) == (size, _sha256(path.read_bytes()))
    assert holes >= 3 * MiB - 4096 and not hasher.torn
    hasher.truncate(10)  # the file shrank under the read: this read is not used
    assert hasher.torn


def test_a_file_that_never_reads_whole_is_hashed_from_one_copy(tmp_path, monkeypatch):
    class AlwaysTorn(stat_cache._Hasher):  # noqa: SLF001 - a file shrinking under every read
        torn = property(lambda self: True, lambda self, value: None)

        def write(self, data: bytes) -> int:
            self.digest.update(b"what a torn read saw")  # its hash must never be used
            return super().write(data)

    monkeypatch.setattr(stat_cache, "_Hasher", AlwaysTorn)
    roots = _hostile_world(tmp_path)
    manifest = build_manifest(roots)
    for path, entry in manifest.files().items():
        top, _, rest = path.partition("/")
        assert entry.sha256 == _sha256((roots.root(top) / rest).read_bytes()), path
    assert _rebuilt(manifest, roots) == _snapshot(roots)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
