"""Populating from a local folder copies file data in the kernel (reflink, else
copy_file_range, else read/write), with the same caps as any other source."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import environment.archive as archive
from environment.archive import ArchiveLimits, LocalFile, SafeExtractor, UnsafeArchive
from tests.environment.factories import tree


def _folder(base: Path) -> Path:
    (base / "filesystem" / "docs").mkdir(parents=True)
    (base / "filesystem" / "docs" / "big.bin").write_bytes(os.urandom(3 * 1024**2 + 17))
    (base / "filesystem" / "docs" / "empty.txt").write_bytes(b"")
    (base / "filesystem" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (base / "filesystem" / "run.sh").chmod(0o755)
    os.utime(base / "filesystem" / "run.sh", (1_600_000_000, 1_600_000_000))
    (base / ".apps_data" / "mail").mkdir(parents=True)
    (base / ".apps_data" / "mail" / "inbox.mbox").write_text("From x\n\nhi\n")
    return base


def _populate(client, folder: Path) -> None:
    reply = client.post(
        "/data/populate",
        json={"sources": [{"url": folder.as_uri(), "subsystem": "world"}], "mode": "replace"},
    )
    assert reply.status_code == 200, reply.text


def _same_world(folder: Path, settings) -> None:
    assert tree(settings.fs_root) == tree(folder / "filesystem")
    assert tree(settings.apps_data_root) == tree(folder / ".apps_data")
    assert os.stat(settings.fs_root / "run.sh").st_mode & 0o100
    assert os.stat(settings.fs_root / "run.sh").st_mtime == 1_600_000_000


def test_a_folder_source_is_copied_in_the_kernel(client, settings, tmp_path, monkeypatch):
    copied: list[int] = []
    real = os.copy_file_range

    def counting(source: int, sink: int, count: int, *offsets: int) -> int:
        done = real(source, sink, count, *offsets)
        copied.append(done)
        return done

    monkeypatch.setattr(os, "copy_file_range", counting)
    folder = _folder(tmp_path / "seed")
    if _reflinks(tmp_path):
        pytest.skip("this filesystem shares blocks (FICLONE): copy_file_range is not reached")
    _populate(client, folder)
    _same_world(folder, settings)
    assert sum(copied) == 3 * 1024**2 + 17 + len(b"#!/bin/sh\n") + len("From x\n\nhi\n")


def _reflinks(base: Path) -> bool:
    (base / "probe-a").write_bytes(b"probe")
    with (base / "probe-a").open("rb") as source, (base / "probe-b").open("wb") as sink:
        return archive._clone(source.fileno(), sink.fileno())  # noqa: SLF001


def test_without_copy_file_range_the_folder_is_copied_through_read_and_write(
    client, settings, tmp_path, monkeypatch
):
    def refused(*_args: int) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refused)
    monkeypatch.setattr(archive, "_clone", lambda source, sink: False)
    folder = _folder(tmp_path / "seed")
    _populate(client, folder)
    _same_world(folder, settings)


def _extractor(tmp_path: Path, **limits: int) -> tuple[SafeExtractor, Path]:
    staging = tmp_path / "staging"
    staging.mkdir()
    extractor = SafeExtractor(lambda name: (staging, name), ArchiveLimits(**limits))
    extractor.begin_source(lambda: 1 << 62)
    return extractor, staging


def _local(path: Path) -> LocalFile:
    return LocalFile(os.open(path, os.O_RDONLY))


def test_a_local_file_grown_since_its_size_was_taken_is_cut_to_that_size(tmp_path):
    extractor, staging = _extractor(tmp_path)
    source = tmp_path / "grown.bin"
    source.write_bytes(b"0123456789" * 1000)
    local = _local(source)
    try:
        extractor.add_file("grown.bin", local, 4096, False, None)
    finally:
        os.close(local.descriptor)
    assert (staging / "grown.bin").read_bytes() == (b"0123456789" * 1000)[:4096]
    assert extractor.bytes_written == 4096


def test_a_local_file_that_shrank_since_its_size_was_taken_is_refused(tmp_path):
    extractor, _ = _extractor(tmp_path)
    source = tmp_path / "shrunk.bin"
    source.write_bytes(b"x" * 100)
    local = _local(source)
    try:
        with pytest.raises(UnsafeArchive, match="shrank"):
            extractor.add_file("shrunk.bin", local, 4096, False, None)
    finally:
        os.close(local.descriptor)


def test_a_local_file_past_the_populate_cap_is_refused_before_it_is_copied(tmp_path):
    extractor, staging = _extractor(tmp_path, max_bytes=1000)
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * 2000)
    local = _local(source)
    try:
        with pytest.raises(UnsafeArchive) as refused:
            extractor.add_file("big.bin", local, 2000, False, None)
    finally:
        os.close(local.descriptor)
    assert refused.value.code == "archive_too_large" and not (staging / "big.bin").exists()
