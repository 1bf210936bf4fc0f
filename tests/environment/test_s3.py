"""Populate from and snapshot to S3, against a real S3-compatible server (SeaweedFS) on loopback."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import s3fs

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, tar_gz
from tests.environment.seaweed import SeaweedS3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


@pytest.fixture
def bucket(s3: SeaweedS3, request: pytest.FixtureRequest) -> tuple[s3fs.S3FileSystem, str]:
    fs = s3fs.S3FileSystem(**s3.storage_options)
    name = "b-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    fs.mkdir(name)
    return fs, name


@pytest.fixture
def s3_env(tmp_path: Path, s3: SeaweedS3) -> Iterator[tuple[httpx.Client, EnvironmentSettings]]:
    settings = EnvironmentSettings(
        fs_root=tmp_path / "filesystem",
        apps_data_root=tmp_path / ".apps_data",
        storage_options=s3.storage_options,
        json_logs=False,
        log_level="WARNING",
    )
    with (
        EnvironmentServer(settings, server_factory=make_test_server) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        yield http, settings


def test_populate_from_s3_archive_and_prefix(s3_env, bucket):
    http, settings = s3_env
    fs, name = bucket
    fs.pipe(
        f"{name}/worlds/w1.tar.gz",
        tar_gz([("filesystem/Reports/q3.txt", b"q3"), (".apps_data/mail/inbox.mbox", b"From x\n")]),
    )
    fs.pipe(f"{name}/overlay/filesystem/Inputs/brief.txt", b"brief")
    fs.pipe(f"{name}/overlay/filesystem/Inputs/data/table.csv", b"a,b\n")
    reply = http.post(
        "/data/populate",
        json={
            "sources": [
                {"url": f"s3://{name}/worlds/w1.tar.gz", "subsystem": "world"},
                {"url": f"s3://{name}/overlay", "subsystem": "world"},
            ]
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["objects_added"] == 4
    assert (settings.fs_root / "Reports/q3.txt").read_bytes() == b"q3"
    assert (settings.fs_root / "Inputs/data/table.csv").read_bytes() == b"a,b\n"
    assert (settings.apps_data_root / "mail/inbox.mbox").read_bytes() == b"From x\n"


def test_snapshot_to_s3_matches_the_streamed_snapshot(s3_env, bucket):
    http, settings = s3_env
    fs, name = bucket
    settings.fs_root.joinpath("notes.txt").write_text("hello")
    settings.apps_data_root.joinpath("chat").mkdir()
    streamed = http.post("/data/snapshot").content
    url = f"s3://{name}/snapshots/trial-1/after.tar.gz"
    reply = http.post("/data/snapshot/s3", json={"url": url, "snapshot_id": "trial-1-after"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    stored = fs.cat(url)
    assert body["url"] == url and body["snapshot_id"] == "trial-1-after"
    assert body["size_bytes"] == len(stored) and body["sha256"] == hashlib.sha256(stored).hexdigest()
    assert stored == streamed  # deterministic: the same world gives the same archive
    with tarfile.open(fileobj=io.BytesIO(stored), mode="r:gz") as archive:
        assert archive.extractfile("filesystem/notes.txt").read() == b"hello"


def test_snapshot_url_from_prefix_and_upload_failure_names_the_url(s3_env, bucket):
    http, settings = s3_env
    _, name = bucket
    assert http.post("/data/snapshot/s3", json={}).status_code == 400  # no url and no prefix configured
    bad = http.post(
        "/data/snapshot/s3",
        json={
            "url": f"s3://{name}/x.tar.gz",
            "storage_options": {
                "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
                "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
            },
        },
    )
    assert bad.status_code == 502 and f"s3://{name}/x.tar.gz" in bad.json()["detail"]["error"]
