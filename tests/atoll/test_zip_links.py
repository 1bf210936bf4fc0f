"""Zip symbolic links, read the one way (atoll.members.is_zip_symlink) by every reader of world
archives: the loader refuses them, populate keeps one only inside the world, the grader's
snapshot and gold readers never take one for a file (its data is a target's name)."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from atoll.benchmark import Benchmark, Task
from atoll.errors import AtollError
from atoll.loader import inspect_world_zip, world_personas
from atoll.members import UnsafeArchive, is_zip_symlink, zip_file_type
from environment.archive import ArchiveLimits, SafeExtractor
from environment.archive_readers import extract_zip
from grader.gold import _read_world
from grader.snapshot import Snapshot

LINK = stat.S_IFLNK | 0o777


def _member(name: str, mode: int | None) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    if mode is not None:
        info.create_system = 3  # Unix: the mode is in external_attr's high bits
        info.external_attr = mode << 16
    return info


def _zip(path: Path, members: list[tuple[str, bytes, int | None]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, mode in members:
            archive.writestr(_member(name, mode), data)
    return path


@pytest.mark.parametrize(
    ("mode", "link", "file_type"),
    [
        (LINK, True, stat.S_IFLNK),
        (stat.S_IFREG | 0o644, False, stat.S_IFREG),
        (stat.S_IFDIR | 0o755, False, stat.S_IFDIR),
        (None, False, 0),  # a Windows archiver records no mode
        (stat.S_IFCHR | 0o600, False, stat.S_IFCHR),
    ],
)
def test_a_zip_members_type_is_read_from_its_recorded_unix_mode(mode, link, file_type):
    info = _member("x", mode)
    assert is_zip_symlink(info) is link and zip_file_type(info) == file_type


def test_the_loader_refuses_a_world_zip_holding_a_link(tmp_path):
    world = _zip(tmp_path / "w.zip", [("filesystem/a.txt", b"a", None), ("filesystem/x", b"/etc", LINK)])
    with pytest.raises(AtollError, match="filesystem/x.*symbolic link"):
        inspect_world_zip(world)


def test_the_loader_does_not_read_personas_through_a_link(tmp_path):
    # Read as a file, the link's data (a path) would be parsed as the personas.
    world = _zip(tmp_path / "w.zip", [(".apps_data/coworkers/personas.json", b"/etc/passwd", LINK)])
    assert world_personas(world) == []


def test_populate_keeps_no_link_leading_out_of_the_world(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    extractor = SafeExtractor(lambda name: (staging, name), ArchiveLimits())
    inside = _zip(tmp_path / "in.zip", [("a.txt", b"a", None), ("b", b"a.txt", LINK)])
    extract_zip(inside, extractor)
    assert (staging / "b").is_symlink() and (staging / "b").read_bytes() == b"a"
    out = _zip(tmp_path / "out.zip", [("escape", b"../../outside", LINK)])
    with pytest.raises(UnsafeArchive, match="points outside the world"):
        extract_zip(out, SafeExtractor(lambda name: (staging, name), ArchiveLimits()))
    assert not (staging / "escape").exists() and not (staging / "escape").is_symlink()


def test_the_grader_reads_no_link_as_a_file(tmp_path):
    world = _zip(
        tmp_path / "w.zip",
        [("filesystem/a.txt", b"a", None), ("filesystem/secret", b"/etc/shadow", LINK)],
    )
    snapshot = Snapshot(world)
    assert set(snapshot.entries) == {"filesystem/a.txt"}
    assert snapshot.read_many({"filesystem/a.txt", "filesystem/secret"}) == {"filesystem/a.txt": b"a"}
    benchmark = Benchmark.model_construct(world_archives={"w": str(world)}, world_seeds={}, task_overlays={})
    task = Task.model_construct(task_id="t", world_id="w")
    assert _read_world(benchmark, task) == {"filesystem/a.txt": b"a"}
