"""Snapshots of a hostile world: sparse files, files that grow while they are read, and the
deadline that keeps the world lock from being held longer than the configured timeout."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, tar_gz

GiB = 1024**3
MiB = 1024**2


@pytest.fixture
def start(settings: EnvironmentSettings) -> Iterator:
    servers: list[EnvironmentServer] = []

    def start(**changes: object) -> tuple[httpx.Client, EnvironmentSettings]:
        configured = EnvironmentSettings(**{**settings.model_dump(), **changes})
        server = EnvironmentServer(configured, server_factory=make_test_server).start()
        servers.append(server)
        return httpx.Client(base_url=server.url, timeout=120), configured

    yield start
    for server in servers:
        server.stop()


def _sparse(path: Path, size: int, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(data)
        handle.truncate(size)


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isreg()}  # type: ignore[union-attr]


def test_sparse_files_past_the_apparent_cap_are_refused_at_once(start):
    http, settings = start(snapshot_max_bytes=256 * MiB)
    for index in range(6):
        _sparse(settings.fs_root / f"hole{index}.bin", GiB)  # 6 GiB that take no disk
    started = time.monotonic()
    reply = http.post("/data/snapshot")
    assert reply.status_code == 413, reply.text
    assert time.monotonic() - started < 10
    assert reply.json()["detail"]["code"] == "snapshot_too_large"
    assert "apparent size" in reply.json()["detail"]["error"]


def test_the_allocated_cap_counts_bytes_on_disk(start):
    http, settings = start(snapshot_max_allocated_bytes=4 * MiB)
    (settings.fs_root / "real.bin").write_bytes(os.urandom(8 * MiB))
    reply = http.post("/data/snapshot")
    assert reply.status_code == 413, reply.text
    assert "on disk" in reply.json()["detail"]["error"]


def test_a_sparse_file_within_the_caps_is_archived_whole_and_counted(start):
    http, settings = start()
    _sparse(settings.fs_root / "sparse.bin", 16 * MiB, b"head")
    reply = http.post("/data/snapshot")
    assert reply.status_code == 200, reply.text
    content = _members(reply.content)["filesystem/sparse.bin"]
    assert len(content) == 16 * MiB and content.startswith(b"head") and not content[4:].strip(b"\0")
    assert int(reply.headers["X-Snapshot-Apparent-Bytes"]) == 16 * MiB
    assert int(reply.headers["X-Snapshot-Allocated-Bytes"]) < MiB


def test_sparse_files_are_refused_at_once_with_the_default_caps(start):
    # Six 1 GiB holes are within the default apparent cap (8 GiB) and take no disk, but a
    # snapshot would compress 6 GiB of zeros: about a minute. The deadline here only bounds
    # the test: without the sparse cap the reply is a 503 after 20 s.
    http, settings = start(snapshot_timeout_s=20)
    (settings.fs_root / "a-real.txt").write_bytes(b"data")
    for index in range(6):
        _sparse(settings.fs_root / f"hole{index}.bin", GiB, b"head")
    started = time.monotonic()
    reply = http.post("/data/snapshot")
    assert reply.status_code == 413, reply.text
    assert time.monotonic() - started < 5
    error = reply.json()["detail"]["error"]
    assert "'filesystem/hole0.bin' is sparse" in error and "ATOLL_SNAPSHOT_MAX_SPARSE_BYTES" in error


def test_holes_count_across_files_and_up_to_the_cap_are_stored(start):
    http, settings = start(snapshot_max_sparse_bytes=10 * MiB)
    _sparse(settings.fs_root / "one.bin", 6 * MiB, b"x")
    reply = http.post("/data/snapshot")
    assert reply.status_code == 200, reply.text
    assert len(_members(reply.content)["filesystem/one.bin"]) == 6 * MiB
    _sparse(settings.fs_root / "two.bin", 6 * MiB, b"x")  # 12 MiB of holes together
    reply = http.post("/data/snapshot")
    assert reply.status_code == 413, reply.text
    assert "'filesystem/two.bin' is sparse" in reply.json()["detail"]["error"]


def test_one_file_past_the_per_file_cap_is_refused_before_anything_is_read(start):
    http, settings = start(snapshot_max_file_bytes=2 * MiB)
    (settings.fs_root / "small.txt").write_bytes(b"ok")
    (settings.fs_root / "big.bin").write_bytes(os.urandom(3 * MiB))
    reply = http.post("/data/snapshot")
    assert reply.status_code == 413, reply.text
    error = reply.json()["detail"]["error"]
    assert "'filesystem/big.bin' is 3145728 bytes" in error and "ATOLL_SNAPSHOT_MAX_FILE_BYTES" in error


def test_the_deadline_releases_the_world_lock(start):
    http, settings = start(
        snapshot_timeout_s=1, snapshot_max_sparse_bytes=8 * GiB, snapshot_max_file_bytes=8 * GiB
    )
    _sparse(settings.fs_root / "huge.bin", 4 * GiB)  # minutes of zeros to compress
    started = time.monotonic()
    reply = http.post("/data/snapshot")
    elapsed = time.monotonic() - started
    assert reply.status_code == 503, reply.text
    assert reply.json()["detail"]["code"] == "snapshot_timeout" and elapsed < 10
    populated = http.post("/data/populate", files={"archive": ("w.tar.gz", tar_gz([("after.txt", b"1")]))})
    assert populated.status_code == 200  # the lock was given back
    assert time.monotonic() - started < 15


def test_a_file_growing_during_the_snapshot_is_read_consistently(start):
    http, settings = start()
    growing = settings.fs_root / "log.txt"
    growing.write_bytes(b"")
    for index in range(40):  # other files, so the snapshot takes a while
        (settings.fs_root / f"f{index:02}.bin").write_bytes(os.urandom(256 * 1024))
    stop = threading.Event()

    def write() -> None:
        with growing.open("ab", buffering=0) as handle:
            line = 0
            while not stop.is_set():
                handle.write(b"line %08d\n" % line)
                line += 1
                time.sleep(0.0005)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        replies = [http.post("/data/snapshot") for _ in range(5)]
    finally:
        stop.set()
        writer.join()
    final = growing.read_bytes()
    for reply in replies:
        assert reply.status_code == 200, reply.text
        content = _members(reply.content)["filesystem/log.txt"]
        assert final.startswith(content) and len(content) % 14 == 0  # whole lines: one clean read
