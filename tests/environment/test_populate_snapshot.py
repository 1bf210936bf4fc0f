"""Populate and snapshot over real HTTP: round trips, determinism, sources, modes, responsiveness."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from atoll.world_archive import SNAPSHOT_MTIME
from environment import EnvironmentServer
from environment.populate import WorldRoots
from environment.snapshot import write_snapshot
from tests.environment.factories import make_test_server, tar_gz


def _world_folder(root: Path) -> Path:
    """A small world in the APEX layout: top-level filesystem/ and .apps_data/."""
    files = {
        "filesystem/Reports/q3 summary.txt": b"revenue up 4%",
        "filesystem/Reports/Überblick.md": "# Übersicht\n".encode(),
        "filesystem/Inbox/notes.txt": b"call Dana",
        "filesystem/bin/run.sh": b"#!/bin/sh\necho hi\n",
        ".apps_data/mail/All mail Including Spam and Trash.mbox": b"From a@b Mon Jan 1 00:00:00 2024\n\nhi\n",
        ".apps_data/calendar/user@example.com.ics": b"BEGIN:VCALENDAR\nEND:VCALENDAR\n",
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (root / "filesystem/bin/run.sh").chmod(0o755)
    (root / "filesystem/Empty").mkdir()
    return root


def _tar_of(folder: Path, arcname: str = ".") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(folder, arcname=arcname)
    return buffer.getvalue()


def _zip_of(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, path.relative_to(folder).as_posix())
    return target


def _snapshot(http: httpx.Client) -> tuple[bytes, httpx.Response]:
    reply = http.post("/data/snapshot")
    assert reply.status_code == 200, reply.text
    return reply.content, reply


def _members(archive: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return tar.getmembers()


def test_populate_then_snapshot_round_trip_is_deterministic(client, tmp_path, settings):
    world = _world_folder(tmp_path / "source")
    fs_reply = client.post("/data/populate", files={"archive": ("fs.tar.gz", _tar_of(world / "filesystem"))})
    assert fs_reply.status_code == 200, fs_reply.text
    assert fs_reply.json()["objects_added"] == 4 and fs_reply.json()["subsystem"] == "filesystem"
    apps_reply = client.post(
        "/data/populate",
        params={"subsystem": ".apps_data"},
        files={"archive": ("apps.tar.gz", _tar_of(world / ".apps_data"))},
    )
    assert apps_reply.status_code == 200, apps_reply.text

    archive, reply = _snapshot(client)
    assert reply.headers["X-Snapshot-SHA256"] == hashlib.sha256(archive).hexdigest()
    assert int(reply.headers["content-length"]) == len(archive)
    members = _members(archive)
    names = [m.name for m in members]
    fs_part = [n for n in names if n.startswith("filesystem")]
    apps_part = [n for n in names if n.startswith(".apps_data")]
    assert names == fs_part + apps_part  # filesystem first, then .apps_data
    assert fs_part == sorted(fs_part) and apps_part == sorted(apps_part)
    assert "filesystem/Reports/Überblick.md" in names and "filesystem/Empty" in names
    assert ".apps_data/mail/All mail Including Spam and Trash.mbox" in names
    for member in members:
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
        assert member.mtime == SNAPSHOT_MTIME and (member.isfile() or member.isdir())
    assert next(m for m in members if m.name == "filesystem/bin/run.sh").mode == 0o755
    assert gzip.decompress(archive)  # complete, with its trailer
    assert archive[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime 0

    again, _ = _snapshot(client)
    assert again == archive  # same world, same bytes

    # The snapshot populates a fresh environment (subsystem=world) that snapshots identically.
    other = settings.model_copy(
        update={"fs_root": tmp_path / "w2" / "filesystem", "apps_data_root": tmp_path / "w2" / ".apps_data"}
    )
    with (
        EnvironmentServer(other, server_factory=make_test_server) as env2,
        httpx.Client(base_url=env2.url) as http2,
    ):
        reply2 = http2.post(
            "/data/populate", params={"subsystem": "world"}, files={"archive": ("snap.tar.gz", archive)}
        )
        assert reply2.status_code == 200, reply2.text
        assert _snapshot(http2)[0] == archive


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "folder"])
def test_json_sources_take_any_fsspec_url(client, tmp_path, settings, kind):
    world = _world_folder(tmp_path / "source")
    if kind == "tar.gz":
        path = tmp_path / "world.tar.gz"
        path.write_bytes(_tar_of(world))
    elif kind == "zip":
        path = _zip_of(world, tmp_path / "world.zip")
    else:
        path = world
    reply = client.post("/data/populate", json={"sources": [{"url": path.as_uri(), "subsystem": "world"}]})
    assert reply.status_code == 200, reply.text
    assert reply.json()["objects_added"] == 6
    assert (settings.fs_root / "Reports" / "q3 summary.txt").read_bytes() == b"revenue up 4%"
    assert (settings.apps_data_root / "calendar" / "user@example.com.ics").exists()
    assert os.access(settings.fs_root / "bin" / "run.sh", os.X_OK)


def test_nested_subsystem_and_several_sources_in_one_request(client, tmp_path, settings):
    first = tmp_path / "first.tar.gz"
    first.write_bytes(tar_gz([("a.txt", b"A"), ("shared.txt", b"first")]))
    second = tmp_path / "second.tar.gz"
    second.write_bytes(tar_gz([("shared.txt", b"second")]))
    reply = client.post(
        "/data/populate",
        json={
            "sources": [
                {"url": first.as_uri(), "subsystem": "filesystem/inbox"},
                {"url": second.as_uri(), "subsystem": "filesystem/inbox"},
            ]
        },
    )
    assert reply.status_code == 200, reply.text
    assert (settings.fs_root / "inbox" / "shared.txt").read_bytes() == b"second"  # later source wins
    assert (settings.fs_root / "inbox" / "a.txt").read_bytes() == b"A"


def test_merge_keeps_other_files_and_replace_empties_the_target(client, settings):
    settings.fs_root.mkdir(parents=True, exist_ok=True)
    (settings.fs_root / "old.txt").write_text("old")
    (settings.fs_root / "same.txt").write_text("old version")
    archive = tar_gz([("same.txt", b"new version"), ("new.txt", b"new")])
    assert client.post("/data/populate", files={"archive": ("a.tar.gz", archive)}).status_code == 200
    assert sorted(os.listdir(settings.fs_root)) == ["new.txt", "old.txt", "same.txt"]
    assert (settings.fs_root / "same.txt").read_text() == "new version"

    reply = client.post(
        "/data/populate",
        params={"mode": "replace"},
        files={"archive": ("b.tar.gz", tar_gz([("only.txt", b"1")]))},
    )
    assert reply.status_code == 200 and reply.json()["mode"] == "replace"
    assert os.listdir(settings.fs_root) == ["only.txt"]


def test_an_unknown_mode_is_refused_before_anything_is_extracted(client, settings, tmp_path):
    settings.fs_root.mkdir(parents=True, exist_ok=True)
    (settings.fs_root / "kept.txt").write_text("kept")
    archive = tar_gz([("new.txt", b"new")])
    for reply in (
        client.post("/data/populate", params={"mode": "wipe"}, files={"archive": ("a.tar.gz", archive)}),
        client.post(
            "/data/populate",
            params={"mode": "wipe"},
            content=archive,
            headers={"content-type": "application/gzip"},
        ),
        client.post("/data/populate/s3", json={"sources": [{"url": "file:///x.tar.gz"}], "mode": "wipe"}),
    ):
        assert reply.status_code == 422, reply.text
        assert "mode" in reply.text and "'merge' or 'replace'" in reply.text
    assert os.listdir(settings.fs_root) == ["kept.txt"]


def test_missing_source_and_wrong_content_type_are_clear_errors(client, tmp_path):
    reply = client.post("/data/populate", json={"sources": [{"url": (tmp_path / "nope.tar.gz").as_uri()}]})
    assert reply.status_code == 400 and "nope.tar.gz" in reply.json()["detail"]["error"]
    assert (
        client.post("/data/populate", content=b"x", headers={"content-type": "text/plain"}).status_code == 415
    )
    assert client.post("/data/populate", files={"wrong_field": ("a", b"x")}).status_code == 400


def test_snapshot_never_follows_symlinks_out_of_the_world(client, settings, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    settings.fs_root.mkdir(parents=True, exist_ok=True)
    (settings.fs_root / "real.txt").write_text("inside")
    os.symlink(secret, settings.fs_root / "leak.txt")
    os.symlink("real.txt", settings.fs_root / "alias.txt")
    os.symlink(tmp_path, settings.fs_root / "escape_dir")
    archive, _ = _snapshot(client)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = tar.getnames()
        assert "filesystem/alias.txt" in names and tar.extractfile("filesystem/alias.txt").read() == b"inside"
        assert "filesystem/leak.txt" not in names and "filesystem/escape_dir" not in names
        assert all(b"host secret" not in tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())


def test_snapshot_that_fails_midway_leaves_no_valid_archive(tmp_path):
    roots = WorldRoots(tmp_path / "fs", tmp_path / "apps")
    roots.fs_root.mkdir()
    roots.apps_data_root.mkdir()
    for index in range(20):
        (roots.fs_root / f"file{index:02}.bin").write_bytes(os.urandom(256 * 1024))

    class FailingSink(io.BytesIO):
        """A disk that fills up after 1 MiB."""

        def write(self, data):
            if self.tell() + len(data) > 1024 * 1024:
                raise OSError(28, "No space left on device")
            return super().write(data)

    sink = FailingSink()
    with pytest.raises(OSError, match="No space left"):
        write_snapshot(roots, sink)
    partial = sink.getvalue()
    assert partial  # something was written before the failure...
    # ...but it is not a readable archive: no gzip trailer, truncated tar
    with pytest.raises(EOFError):
        gzip.decompress(partial)
    with (
        pytest.raises((EOFError, tarfile.TarError)),
        tarfile.open(fileobj=io.BytesIO(partial), mode="r:gz") as tar,
    ):
        tar.getmembers()


@pytest.mark.slow
def test_health_stays_responsive_during_a_large_populate(client, tmp_path, settings):
    big = tmp_path / "big.tar.gz"
    with tarfile.open(big, "w:gz", compresslevel=1) as archive:
        block = os.urandom(1024 * 1024)
        for index in range(12):
            info = tarfile.TarInfo(f"big/part{index:02}.bin")
            info.size = 16 * len(block)
            archive.addfile(info, io.BytesIO(block * 16))
    latencies: list[float] = []
    done = threading.Event()

    def poll_health():
        with httpx.Client(base_url=client.base_url, timeout=10) as probe:
            while not done.is_set():
                started = time.perf_counter()
                assert probe.get("/health").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        with big.open("rb") as upload:
            started = time.perf_counter()
            reply = client.post("/data/populate", files={"archive": ("big.tar.gz", upload)})
            populate_s = time.perf_counter() - started
    finally:
        done.set()
        poller.join()
    assert reply.status_code == 200, reply.text
    assert reply.json()["extracted_bytes"] == 12 * 16 * 1024 * 1024
    assert len(latencies) >= 5, f"health was polled only {len(latencies)} times in {populate_s:.1f} s"
    # A blocked event loop would stall /health for about the whole populate.
    assert max(latencies) < min(1.0, populate_s / 2), (
        f"/health took {max(latencies):.2f} s of {populate_s:.1f} s"
    )
    shutil.rmtree(settings.fs_root / "big")


@pytest.mark.parametrize("mode", ["w:", "w:bz2", "w:xz", "w:gz"])
def test_every_tar_compression_populates(client, settings, mode):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for index in range(30):
            content = os.urandom(2000) * (index + 1)
            info = tarfile.TarInfo(f"d{index % 3}/f{index}.bin")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    reply = client.post("/data/populate", files={"archive": ("w.tar", buffer.getvalue())})
    assert reply.status_code == 200, reply.text
    assert reply.json()["objects_added"] == 30
    assert (settings.fs_root / "d2" / "f29.bin").stat().st_size == 2000 * 30


def test_raw_archive_body_is_extracted_while_it_arrives(client, settings, tmp_path):
    archive = tar_gz([(f"raw/f{index}.txt", os.urandom(50_000)) for index in range(40)])

    def body():  # a chunked upload, as a streaming client sends it
        for start in range(0, len(archive), 64 * 1024):
            yield archive[start : start + 64 * 1024]

    reply = client.post("/data/populate", content=body(), headers={"content-type": "application/gzip"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["objects_added"] == 40
    zipped = _zip_of(_world_folder(tmp_path / "source") / "filesystem", tmp_path / "fs.zip")
    reply = client.post(
        "/data/populate", content=zipped.read_bytes(), headers={"content-type": "application/zip"}
    )
    assert reply.status_code == 200 and reply.json()["objects_added"] == 4


def test_refused_raw_body_answers_without_waiting_for_the_rest(client, settings):
    evil = tar_gz([("../escape.txt", b"x")]) + os.urandom(4 * 1024 * 1024)
    started = time.perf_counter()
    reply = client.post("/data/populate", content=evil, headers={"content-type": "application/gzip"})
    assert reply.status_code == 400 and reply.json()["detail"]["member"] == "../escape.txt"
    assert time.perf_counter() - started < 10
    assert client.get("/health").status_code == 200


def test_populate_from_an_http_url(client, settings, tmp_path):
    import functools
    import http.server

    served = tmp_path / "served"
    served.mkdir()
    (served / "world.tar.gz").write_bytes(_tar_of(_world_folder(tmp_path / "source")))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as web:
        thread = threading.Thread(target=web.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{web.server_address[1]}/world.tar.gz"
            reply = client.post("/data/populate", json={"sources": [{"url": url, "subsystem": "world"}]})
            missing = client.post(
                "/data/populate",
                json={"sources": [{"url": url.replace("world", "nope"), "subsystem": "world"}]},
            )
        finally:
            web.shutdown()
    assert reply.status_code == 200, reply.text
    assert (settings.apps_data_root / "calendar" / "user@example.com.ics").exists()
    assert missing.status_code == 400 and "nope.tar.gz" in missing.json()["detail"]["error"]


def test_staging_left_by_a_crash_is_removed_at_start(settings):
    leftover = settings.fs_root / ".atoll-staging-deadbeef" / "half.txt"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("half a populate")
    (settings.fs_root / "kept.txt").write_text("world file")
    with EnvironmentServer(settings, server_factory=make_test_server):
        assert sorted(os.listdir(settings.fs_root)) == ["kept.txt"]


@pytest.mark.parametrize("snapshot_format", ["files", "tar.gz"])
def test_a_snapshot_to_a_local_prefix_makes_the_folders_it_writes_beneath(tmp_path, snapshot_format):
    """Found by the property tests: Archipelago's "files" form (its default) wrote
    ``<prefix>/<id>/filesystem/…`` into folders that a local destination does not have (an
    object store needs none), so every such snapshot failed 502; the tar.gz form too when the
    prefix folder was not made beforehand."""
    from fastapi.testclient import TestClient

    from environment.app import create_app
    from tests.environment.factories import world_settings

    prefix = tmp_path / "snapshots" / "not-made-yet"
    settings = world_settings(tmp_path / "world", snapshot_url_prefix=prefix.as_uri())
    (settings.fs_root / "Reports").mkdir(parents=True)
    (settings.fs_root / "Reports" / "q3.txt").write_text("revenue up 4%")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        reply = client.post("/data/snapshot/s3", json={"format": snapshot_format, "snapshot_id": "snap_1"})
    assert reply.status_code == 200, reply.text
    if snapshot_format == "files":
        assert reply.json()["files_uploaded"] == 1
        assert (prefix / "snap_1" / "filesystem" / "Reports" / "q3.txt").read_text() == "revenue up 4%"
    else:
        assert (prefix / "snap_1.tar.gz").stat().st_size == reply.json()["size_bytes"]
