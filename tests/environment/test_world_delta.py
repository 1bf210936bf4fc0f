"""POST /data/snapshot/manifest and /data/snapshot/delta over real HTTP: the manifest is the
world's, a delta carries the whole manifest and only what the populated world lacks, and the
full archive rebuilt from them is /data/snapshot's."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import threading
from pathlib import Path

import httpx
import pytest

from atoll.world_deltas import Delta, write_archive
from atoll.world_manifest import WorldManifest
from environment.world_delta import EMPTY_WORLD

KiB = 1024


def _seed(folder: Path, files: int = 150, size: int = 53 * KiB) -> Path:
    """A world folder (filesystem/ and .apps_data/) of ``files`` random files: ~8 MB by default."""
    for index in range(files):
        tree = "filesystem" if index % 10 else ".apps_data"
        path = folder / tree / f"dept{index % 7}" / f"doc {index:03} ü.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    (folder / "filesystem" / "empty").mkdir(parents=True, exist_ok=True)
    return folder


def _populate(http: httpx.Client, folder: Path, mode: str = "replace") -> None:
    reply = http.post(
        "/data/populate", json={"sources": [{"url": folder.as_uri(), "subsystem": "world"}], "mode": mode}
    )
    assert reply.status_code == 200, reply.text


def _manifest(http: httpx.Client) -> WorldManifest:
    reply = http.post("/data/snapshot/manifest")
    assert reply.status_code == 200, reply.text
    manifest = WorldManifest.from_bytes(reply.content, "reply")
    assert reply.headers["X-World-Digest"] == manifest.digest()
    return manifest


def _delta(http: httpx.Client, tmp_path: Path, **body: str) -> tuple[Delta, httpx.Response]:
    reply = http.post("/data/snapshot/delta", json=body or None)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/gzip"
    assert hashlib.sha256(reply.content).hexdigest() == reply.headers["X-Delta-SHA256"]
    path = tmp_path / f"delta-{len(list(tmp_path.glob('delta-*')))}.tar.gz"
    path.write_bytes(reply.content)
    return Delta(path), reply


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_manifest_is_the_worlds_and_rebuilds_the_snapshot(client, settings, tmp_path):
    _populate(client, _seed(tmp_path / "seed", files=20, size=4 * KiB))
    (settings.fs_root / "run.sh").write_text("#!/bin/sh\n")
    (settings.fs_root / "run.sh").chmod(0o755)
    manifest = _manifest(client)
    delta, reply = _delta(client, tmp_path)  # the seed's files are in the base: only run.sh
    assert delta.manifest.entries == manifest.entries
    assert reply.headers["X-World-Digest"] == manifest.digest()
    assert manifest.files()["filesystem/run.sh"].executable

    blobs = delta.read_blobs(manifest.hashes())

    def open_blob(entry):
        if entry.sha256 in blobs:
            return io.BytesIO(blobs[entry.sha256])
        top, _, rest = entry.path.partition("/")
        return (settings.fs_root.parent / top / rest).open("rb")

    rebuilt = io.BytesIO()
    write_archive(manifest, open_blob, rebuilt)
    assert rebuilt.getvalue() == client.post("/data/snapshot").content


def test_editing_one_file_of_an_8_mb_world_gives_a_delta_of_one_blob(client, env_server, settings, tmp_path):
    _populate(client, _seed(tmp_path / "seed"))
    populated = _manifest(client)
    assert sum(entry.size for entry in populated.files().values()) > 7_500_000
    world = env_server.app.state.world_state
    hashed = world.cache.hashed
    _manifest(client)
    assert world.cache.hashed == hashed  # the populate listed the world: only stats since

    edited = settings.fs_root / "dept1" / "doc 001 ü.bin"
    edited.write_bytes(b"the agent's edit")
    delta, reply = _delta(client, tmp_path, base="../seed/manifest.json", base_digest=populated.digest())

    assert delta.blob_sizes == {_sha(b"the agent's edit"): len(b"the agent's edit")}
    assert reply.headers["X-Delta-Blobs"] == "1" and int(reply.headers["Content-Length"]) < 40_000
    assert delta.manifest.base == "../seed/manifest.json"
    assert delta.manifest.base_digest == populated.digest() == reply.headers["X-Base-Digest"]
    assert world.cache.hashed == hashed + 1  # one file read again, the others only stat'ed


def test_a_delta_follows_deletes_renames_and_new_files(client, settings, tmp_path):
    _populate(client, _seed(tmp_path / "seed", files=12, size=2 * KiB))
    populated = _manifest(client)
    fs = settings.fs_root
    deleted = fs / "dept1" / "doc 001 ü.bin"
    renamed_from, renamed_to = fs / "dept2" / "doc 002 ü.bin", fs / "moved" / "renamed.bin"
    moved_sha = populated.files()["filesystem/dept2/doc 002 ü.bin"].sha256
    deleted.unlink()
    renamed_to.parent.mkdir()
    renamed_from.rename(renamed_to)
    (fs / "new.txt").write_bytes(b"written by the agent")

    delta, _ = _delta(client, tmp_path, base_digest=populated.digest())
    files = delta.manifest.files()
    assert "filesystem/dept1/doc 001 ü.bin" not in files and "filesystem/dept2/doc 002 ü.bin" not in files
    assert files["filesystem/moved/renamed.bin"].sha256 == moved_sha  # its content is the base's
    assert delta.blob_sizes.keys() == {_sha(b"written by the agent")}
    assert delta.manifest.entries == _manifest(client).entries


def test_an_agent_symlink_out_of_the_world_is_not_followed(client, settings, tmp_path):
    _populate(client, _seed(tmp_path / "seed", files=3, size=KiB))
    secret = tmp_path / "host-secret.txt"
    secret.write_bytes(b"host secret")
    (settings.fs_root / "leak.txt").symlink_to(secret)
    (settings.fs_root / "leak-dir").symlink_to(tmp_path)
    (settings.fs_root / "alias.txt").symlink_to("dept1/doc 001 ü.bin")

    delta, _ = _delta(client, tmp_path)
    files = delta.manifest.files()
    assert "filesystem/leak.txt" not in files and not any("leak-dir" in path for path in files)
    assert _sha(b"host secret") not in delta.blob_sizes and not delta.blob_sizes  # alias: a base content
    assert files["filesystem/alias.txt"].sha256 == files["filesystem/dept1/doc 001 ü.bin"].sha256


def test_a_base_digest_other_than_the_populated_worlds_is_refused_naming_both(client, tmp_path):
    _populate(client, _seed(tmp_path / "seed", files=3, size=KiB))
    populated = _manifest(client).digest()
    reply = client.post("/data/snapshot/delta", json={"base_digest": "0" * 64})
    assert reply.status_code == 409
    error = reply.json()["error"]
    assert error["code"] == "base_mismatch" and "0" * 64 in error["message"] and populated in error["message"]
    assert error["populated_digest"] == populated
    bad = client.post("/data/snapshot/delta", json={"base_digest": "not hex"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


def test_before_any_replace_populate_the_base_is_the_empty_world(client, settings, tmp_path):
    (settings.fs_root / "a.txt").write_bytes(b"a")
    (settings.fs_root / "b.txt").write_bytes(b"a")  # one content, one blob
    delta, reply = _delta(client, tmp_path)
    assert delta.manifest.base_digest == EMPTY_WORLD.digest() == reply.headers["X-Base-Digest"]
    assert delta.blob_sizes == {_sha(b"a"): 1}
    # A merge populate does not move the base.
    _populate(client, _seed(tmp_path / "seed", files=2, size=KiB), mode="merge")
    delta, _ = _delta(client, tmp_path, base_digest=EMPTY_WORLD.digest())
    assert len(delta.blob_sizes) == 3


def test_a_manifest_racing_populates_never_sees_half_a_world(client, tmp_path):
    seeds = [_seed(tmp_path / name, files=40, size=8 * KiB) for name in ("a", "b")]
    digests = set()
    for seed in seeds:
        _populate(client, seed)
        digests.add(_manifest(client).digest())
    stop = threading.Event()
    failures: list[str] = []

    def populate_forever() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=60) as http:
            index = 0
            while not stop.is_set():
                reply = http.post(
                    "/data/populate",
                    json={
                        "sources": [{"url": seeds[index % 2].as_uri(), "subsystem": "world"}],
                        "mode": "replace",
                    },
                )
                if reply.status_code != 200:
                    failures.append(reply.text)
                index += 1

    populating = threading.Thread(target=populate_forever, daemon=True)
    populating.start()
    try:
        seen = [_manifest(client).digest() for _ in range(30)]
    finally:
        stop.set()
        populating.join()
    assert not failures and set(seen) <= digests


def test_a_file_growing_during_a_delta_never_makes_a_blob_disagree_with_the_manifest(
    client, settings, tmp_path
):
    _populate(client, _seed(tmp_path / "seed", files=30, size=64 * KiB))
    growing = settings.fs_root / "log.txt"
    growing.write_bytes(b"")
    stop = threading.Event()

    def write() -> None:
        with growing.open("ab", buffering=0) as handle:
            line = 0
            while not stop.is_set():
                handle.write(b"line %08d\n" % line)
                line += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        deltas = [_delta(client, tmp_path)[0] for _ in range(4)]
    finally:
        stop.set()
        writer.join()
    for delta in deltas:
        log = delta.manifest.files()["filesystem/log.txt"]
        (content,) = delta.read_blobs({log.sha256}).values()  # checked against its name
        assert len(content) == log.size and len(content) % 14 == 0


@pytest.mark.parametrize("path", ["/data/snapshot/manifest", "/data/snapshot/delta"])
def test_the_world_read_limits_apply(start_env, path):
    http, settings = start_env(snapshot_max_bytes=1000)
    (settings.fs_root / "big.bin").write_bytes(b"x" * 2000)
    reply = http.post(path)
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "snapshot_too_large"


def test_a_world_a_manifest_cannot_carry_is_a_409_and_the_snapshot_still_works(client, settings):
    (settings.fs_root / "back\\slash.txt").write_text("x")
    for path in ("/data/snapshot/manifest", "/data/snapshot/delta"):
        reply = client.post(path)
        assert reply.status_code == 409 and reply.json()["error"]["code"] == "world_not_manifestable"
    assert client.post("/data/snapshot").status_code == 200


@pytest.fixture
def start_env(settings):
    from environment import EnvironmentServer, EnvironmentSettings
    from tests.environment.factories import make_test_server

    servers = []

    def start(**changes):
        configured = EnvironmentSettings(**{**settings.model_dump(), **changes})
        server = EnvironmentServer(configured, server_factory=make_test_server).start()
        servers.append(server)
        return httpx.Client(base_url=server.url, timeout=60), configured

    yield start
    for server in servers:
        server.stop()
    shutil.rmtree(settings.fs_root, ignore_errors=True)


def test_a_base_manifest_given_is_the_base_whatever_was_populated(client, settings, tmp_path):
    """A world populated from a checkpoint takes its deltas on the seed: the blobs are the
    contents the given manifest lacks, and base_digest is that manifest's."""
    _populate(client, _seed(tmp_path / "seed", files=4, size=KiB))
    seed = _manifest(client)
    (settings.fs_root / "made before the checkpoint.txt").write_bytes(b"before")
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(settings.fs_root.parent / "filesystem", checkpoint / "filesystem")
    shutil.copytree(settings.fs_root.parent / ".apps_data", checkpoint / ".apps_data")
    _populate(client, checkpoint)  # the resumed world: the populated base is now the checkpoint's
    (settings.fs_root / "made after.txt").write_bytes(b"after")

    on_populated, _ = _delta(client, tmp_path)
    assert on_populated.blob_sizes == {_sha(b"after"): 5}
    body = {"base": "../seed.json", "base_manifest": seed.model_dump(mode="json", exclude_none=True)}
    delta, reply = _delta(client, tmp_path, **body)
    assert delta.blob_sizes == {_sha(b"before"): 6, _sha(b"after"): 5}
    assert delta.manifest.base_digest == seed.digest() == reply.headers["X-Base-Digest"]
    assert delta.manifest.base == "../seed.json"
    # base_digest, when given too, must be the manifest's.
    agreeing, _ = _delta(client, tmp_path, **body, base_digest=seed.digest())
    assert agreeing.blob_sizes == delta.blob_sizes
    populated = _manifest(client).digest()
    refused = client.post("/data/snapshot/delta", json={**body, "base_digest": populated})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "base_mismatch" and seed.digest() in error["message"]
    # A manifest out of snapshot order is not a base.
    shuffled = {**body["base_manifest"], "entries": body["base_manifest"]["entries"][::-1]}
    bad = client.post("/data/snapshot/delta", json={"base_manifest": shuffled})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
