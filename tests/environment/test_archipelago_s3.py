"""Archipelago's S3 calls (its example.py, its asynchronous jobs) against atoll, on SeaweedFS."""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import s3fs

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, tar_gz
from tests.environment.seaweed import SeaweedS3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


@pytest.fixture(scope="module")
def shared_bucket(s3: SeaweedS3) -> tuple[s3fs.S3FileSystem, str]:
    # One bucket for the module: SeaweedFS gives every bucket its own volumes, and the test
    # server has only a few (-volume.max=8), so each test gets a folder instead.
    fs = s3fs.S3FileSystem(**s3.storage_options)
    fs.mkdir("archipelago")
    return fs, "archipelago"


@pytest.fixture
def bucket(shared_bucket, request: pytest.FixtureRequest) -> tuple[s3fs.S3FileSystem, str]:
    """(filesystem, "<bucket>/<folder of this test>")."""
    fs, name = shared_bucket
    return fs, f"{name}/{request.node.name.replace('[', '-').replace(']', '')}"


def _settings(tmp_path: Path, **overrides) -> EnvironmentSettings:
    return EnvironmentSettings(
        fs_root=tmp_path / "filesystem",
        apps_data_root=tmp_path / ".apps_data",
        json_logs=False,
        log_level="WARNING",
        preload_servers=False,
        **overrides,
    )


@pytest.fixture
def env(tmp_path: Path, s3: SeaweedS3, bucket) -> Iterator[tuple[str, EnvironmentSettings]]:
    _, name = bucket
    settings = _settings(
        tmp_path, storage_options=s3.storage_options, snapshot_url_prefix=f"s3://{name}/snaps"
    )
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        yield server.url, settings


def _poll(url: str, job_id: str, kind: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reply = requests.get(f"{url}/data/{kind}/s3/status/{job_id}", timeout=10)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        if body["status"] != "running":
            return body
        time.sleep(0.1)
    raise AssertionError(f"{kind} job {job_id} still running")


def test_example_populate_from_s3_prefix(env, bucket):
    url, settings = env
    fs, name = bucket
    fs.pipe(f"{name}/worlds/snap_1/filesystem/IB/model.txt", b"dcf")
    fs.pipe(f"{name}/worlds/snap_1/filesystem/IB/deck/notes.txt", b"notes")
    populate_config = {
        "sources": [{"url": f"s3://{name}/worlds/snap_1/filesystem/", "subsystem": "filesystem"}]
    }
    response = requests.post(
        f"{url}/data/populate/s3", json=populate_config, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["objects_added"] == 2  # example.py prints result['objects_added']
    assert (settings.fs_root / "IB/deck/notes.txt").read_bytes() == b"notes"


def test_async_populate_job(env, bucket):
    url, settings = env
    fs, name = bucket
    fs.pipe(f"{name}/w.tar.gz", tar_gz([("filesystem/a.txt", b"a"), (".apps_data/chat/x.json", b"{}")]))
    started = requests.post(
        f"{url}/data/populate/s3/start",
        json={"sources": [{"url": f"s3://{name}/w.tar.gz", "subsystem": "world"}], "post_populate_hooks": []},
    )
    assert started.status_code == 200, started.text
    body = _poll(url, started.json()["job_id"], "populate")
    assert body["status"] == "done" and body["error"] is None
    assert body["result"]["objects_added"] == 2 and body["result"]["hook_timings"] == []
    assert (settings.apps_data_root / "chat/x.json").read_bytes() == b"{}"

    missing = requests.post(
        f"{url}/data/populate/s3/start", json={"sources": [{"url": f"s3://{name}/nope.tar.gz"}]}
    )
    failed = _poll(url, missing.json()["job_id"], "populate")
    assert failed["status"] == "error" and f"s3://{name}/nope.tar.gz" in failed["error"]
    assert requests.get(f"{url}/data/populate/s3/status/unknown").status_code == 404


def _no_ambient_aws_credentials(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def test_async_populate_uses_request_credentials(tmp_path: Path, s3: SeaweedS3, bucket, monkeypatch):
    _no_ambient_aws_credentials(monkeypatch, tmp_path)
    fs, name = bucket
    fs.pipe(f"{name}/w.tar.gz", tar_gz([("b.txt", b"b")]))
    endpoint_only = {"client_kwargs": {"endpoint_url": s3.endpoint_url}}
    with EnvironmentServer(
        _settings(tmp_path, storage_options=endpoint_only), server_factory=make_test_server
    ) as server:
        started = requests.post(
            f"{server.url}/data/populate/s3/start",
            json={
                "sources": [{"url": f"s3://{name}/w.tar.gz", "subsystem": "filesystem"}],
                "s3_credentials": {"access_key_id": "any", "secret_access_key": "any", "region": "us-east-1"},
            },
        )
        assert _poll(server.url, started.json()["job_id"], "populate")["status"] == "done"
        # The synchronous forms honour them too (before: ignored, and the environment's own used).
        for path in ("/data/populate/s3", "/data/populate"):
            reply = requests.post(
                f"{server.url}{path}",
                json={
                    "sources": [{"url": f"s3://{name}/w.tar.gz", "subsystem": "filesystem/again"}],
                    "s3_credentials": {"access_key_id": "any", "secret_access_key": "any"},
                },
            )
            assert reply.status_code == 200, reply.text
            without = requests.post(
                f"{server.url}{path}", json={"sources": [{"url": f"s3://{name}/w.tar.gz"}]}
            )
            assert without.status_code == 502  # no credentials of its own: the request's were used above
    assert (tmp_path / "filesystem/b.txt").read_bytes() == b"b"
    assert (tmp_path / "filesystem/again/b.txt").read_bytes() == b"b"


def test_populate_without_credentials_is_502_naming_the_url(
    tmp_path: Path, s3: SeaweedS3, bucket, monkeypatch
):
    # Before: a bare 500 with botocore's NoCredentialsError.
    _no_ambient_aws_credentials(monkeypatch, tmp_path)
    _, name = bucket
    source = f"s3://{name}/w.tar.gz"
    endpoint_only = {"client_kwargs": {"endpoint_url": s3.endpoint_url}}
    with (
        EnvironmentServer(
            _settings(tmp_path, storage_options=endpoint_only), server_factory=make_test_server
        ) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        for path in ("/data/populate", "/data/populate/s3"):
            reply = http.post(path, json={"sources": [{"url": source}]})
            assert reply.status_code == 502, reply.text
            detail = reply.json()["detail"]
            assert detail["code"] == "source_unavailable"
            assert source in detail["error"] and "NoCredentialsError" in detail["error"]
        unknown = http.post("/data/populate", json={"sources": [{"url": "nosuch://x/y.tar.gz"}]})
        assert unknown.status_code == 400 and unknown.json()["detail"]["code"] == "bad_source_url"


def test_populate_of_a_missing_object_is_400_naming_it(env, bucket):
    url, _ = env
    _, name = bucket
    reply = httpx.post(f"{url}/data/populate", json={"sources": [{"url": f"s3://{name}/missing.tar.gz"}]})
    assert (
        reply.status_code == 400
        and reply.json()["detail"]["code"] == "source_not_found"
        and f"s3://{name}/missing.tar.gz" in reply.json()["detail"]["error"]
    )


@pytest.mark.parametrize("snapshot_format", ["tar.gz", "files"])
def test_async_snapshot_job(env, bucket, snapshot_format):
    url, settings = env
    fs, name = bucket
    settings.fs_root.joinpath("Reports").mkdir(parents=True)
    settings.fs_root.joinpath("Reports/q3.txt").write_text("q3")
    settings.apps_data_root.joinpath("mail").mkdir(parents=True)
    settings.apps_data_root.joinpath("mail/inbox.mbox").write_text("From x\n")
    streamed = requests.post(f"{url}/data/snapshot").content
    started = requests.post(
        f"{url}/data/snapshot/s3/start",
        json={"format": snapshot_format, "snapshot_id": "snap_abc", "pre_snapshot_hooks": []},
    )
    assert started.status_code == 200, started.text
    body = _poll(url, started.json()["job_id"], "snapshot")
    assert body["status"] == "done", body
    result = body["result"]
    assert result["snapshot_id"] == "snap_abc" and result["hook_timings"] == []
    if snapshot_format == "tar.gz":
        assert result["s3_uri"] == f"s3://{name}/snaps/snap_abc.tar.gz"
        assert fs.cat(result["s3_uri"]) == streamed and result["size_bytes"] == len(streamed)
        assert result["presigned_url"].startswith("http") and "snap_abc.tar.gz" in result["presigned_url"]
        assert httpx.get(result["presigned_url"]).content == streamed  # the presigned URL works
    else:
        assert result["files_uploaded"] == 2 and result["total_bytes"] == len("q3") + len("From x\n")
        assert fs.cat(f"{name}/snaps/snap_abc/filesystem/Reports/q3.txt") == b"q3"
        assert fs.cat(f"{name}/snaps/snap_abc/.apps_data/mail/inbox.mbox") == b"From x\n"
        with tarfile.open(fileobj=io.BytesIO(streamed), mode="r:gz") as archive:
            assert {m.name for m in archive if m.isfile()} == {
                "filesystem/Reports/q3.txt",
                ".apps_data/mail/inbox.mbox",
            }


def test_snapshot_job_refusals(env, tmp_path: Path):
    url, _ = env
    hooks = requests.post(
        f"{url}/data/snapshot/s3/start", json={"pre_snapshot_hooks": [{"name": "db", "command": "pg_dump"}]}
    )
    assert hooks.status_code == 400 and hooks.json()["detail"]["code"] == "hooks_unsupported"
    for path in ("/data/snapshot/s3/start", "/data/snapshot/s3"):
        # The id names the object under the prefix: "../" must not leave it (file:// or s3://).
        traversal = requests.post(f"{url}{path}", json={"snapshot_id": "../../etc"})
        assert traversal.status_code == 422, (path, traversal.text)
    with EnvironmentServer(_settings(tmp_path / "other"), server_factory=make_test_server) as server:
        unconfigured = requests.post(f"{server.url}/data/snapshot/s3/start", json={})
        assert unconfigured.status_code == 400
        assert "ATOLL_SNAPSHOT_URL_PREFIX" in unconfigured.json()["detail"]["error"]


def test_snapshot_job_store_failure_names_the_url(tmp_path: Path, bucket):
    _, name = bucket
    unreachable = {
        "key": "any",
        "secret": "any",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }
    settings = _settings(tmp_path, storage_options=unreachable, snapshot_url_prefix=f"s3://{name}/s")
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        started = requests.post(f"{server.url}/data/snapshot/s3/start", json={"format": "tar.gz"})
        body = _poll(server.url, started.json()["job_id"], "snapshot")
    assert body["status"] == "error" and f"s3://{name}/s/snap_" in body["error"]


def test_jobs_obey_the_url_allow_list(tmp_path: Path, s3: SeaweedS3, bucket):
    _, name = bucket
    settings = _settings(
        tmp_path,
        storage_options=s3.storage_options,
        url_allow=f"s3://{name}/allowed/",
        snapshot_url_prefix=f"s3://{name}/elsewhere",
    )
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        for source in (f"s3://{name}/other/w.tar.gz", "file:///etc"):
            refused = requests.post(
                f"{server.url}/data/populate/s3/start", json={"sources": [{"url": source}]}
            )
            assert refused.status_code == 403 and refused.json()["detail"]["code"] == "url_not_allowed", (
                refused.text
            )
        snapshot = requests.post(f"{server.url}/data/snapshot/s3/start", json={})
        assert snapshot.status_code == 403 and snapshot.json()["detail"]["code"] == "url_not_allowed"


def test_lifecycle_hooks_are_refused_on_every_populate_form(env):
    url, _ = env
    hook = [{"name": "db", "command": "psql -f /.apps_data/db.sql"}]
    source = [{"url": "s3://archipelago/none.tar.gz"}]
    for path in ("/data/populate/s3", "/data/populate/s3/start", "/data/populate"):
        reply = requests.post(f"{url}{path}", json={"sources": source, "post_populate_hooks": hook})
        assert reply.status_code == 400 and reply.json()["detail"]["code"] == "hooks_unsupported", path
    multipart = requests.post(
        f"{url}/data/populate",
        files={"archive": ("w.tar.gz", tar_gz([("a.txt", b"a")]), "application/gzip")},
        data={"post_populate_hooks": json.dumps(hook)},
    )
    assert multipart.status_code == 400 and multipart.json()["detail"]["code"] == "hooks_unsupported"


# Archipelago's reply models for POST /data/snapshot/s3 (its environment/runner/data/snapshot/
# models.py): SnapshotResult for format "tar.gz", SnapshotFilesResult for "files" (its default).
ARCHIPELAGO_ARCHIVE_RESULT = {"snapshot_id", "s3_uri", "presigned_url", "size_bytes", "hook_timings"}
ARCHIPELAGO_FILES_RESULT = {"snapshot_id", "files_uploaded", "total_bytes", "hook_timings"}


def _small_world(settings: EnvironmentSettings) -> None:
    settings.fs_root.joinpath("Reports").mkdir(parents=True)
    settings.fs_root.joinpath("Reports/q3.txt").write_text("q3")
    settings.apps_data_root.joinpath("mail").mkdir(parents=True)
    settings.apps_data_root.joinpath("mail/inbox.mbox").write_text("From x\n")


@pytest.mark.parametrize(
    "body",
    [
        None,  # no body at all, as Archipelago's own endpoint test posts
        {},
        {
            "format": "files",
            "snapshot_id": "snap_sync",
            "pre_snapshot_hooks": [],
            "snapshot_zip_enabled": True,
        },
    ],
    ids=["no-body", "empty", "files"],
)
def test_sync_snapshot_answers_archipelagos_files_result(env, bucket, body):
    url, settings = env
    fs, name = bucket
    _small_world(settings)
    reply = (
        requests.post(f"{url}/data/snapshot/s3", json=body)
        if body is not None
        else requests.post(f"{url}/data/snapshot/s3")
    )
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result.keys() >= ARCHIPELAGO_FILES_RESULT and "url" not in result and "sha256" not in result
    assert result["files_uploaded"] == 2 and result["total_bytes"] == len("q3") + len("From x\n")
    assert result["hook_timings"] == []
    snapshot_id = result["snapshot_id"]
    assert snapshot_id == (body or {}).get("snapshot_id", snapshot_id) and snapshot_id.startswith("snap_")
    assert fs.cat(f"{name}/snaps/{snapshot_id}/filesystem/Reports/q3.txt") == b"q3"
    assert fs.cat(f"{name}/snaps/{snapshot_id}/.apps_data/mail/inbox.mbox") == b"From x\n"


def test_sync_snapshot_answers_archipelagos_archive_result(env, bucket):
    url, settings = env
    fs, name = bucket
    _small_world(settings)
    streamed = requests.post(f"{url}/data/snapshot").content
    reply = requests.post(f"{url}/data/snapshot/s3", json={"format": "tar.gz", "snapshot_id": "snap_tgz"})
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result.keys() >= ARCHIPELAGO_ARCHIVE_RESULT
    assert result["snapshot_id"] == "snap_tgz" and result["s3_uri"] == f"s3://{name}/snaps/snap_tgz.tar.gz"
    assert fs.cat(result["s3_uri"]) == streamed and result["size_bytes"] == len(streamed)
    assert httpx.get(result["presigned_url"]).content == streamed


def test_sync_snapshot_keeps_atolls_form_and_refuses_a_mix(env, bucket):
    url, _ = env
    fs, name = bucket
    target = f"s3://{name}/mine/after.tar.gz"
    atoll = requests.post(f"{url}/data/snapshot/s3", json={"url": target, "snapshot_id": "t1"})
    assert atoll.status_code == 200, atoll.text
    assert {"url", "s3_uri", "sha256", "files", "size_bytes"} <= atoll.json().keys() and fs.exists(target)
    mixed = requests.post(f"{url}/data/snapshot/s3", json={"url": target, "format": "files"})
    assert mixed.status_code == 422 and mixed.json()["detail"]["code"] == "mixed_snapshot_request"
    assert "format" in mixed.json()["detail"]["error"] and "url" in mixed.json()["detail"]["error"]
    hooks = requests.post(
        f"{url}/data/snapshot/s3", json={"pre_snapshot_hooks": [{"name": "db", "command": "x"}]}
    )
    assert hooks.status_code == 400 and hooks.json()["detail"]["code"] == "hooks_unsupported"
    for bad in ("[1, 2]", "{not json"):
        refused = requests.post(
            f"{url}/data/snapshot/s3", data=bad, headers={"Content-Type": "application/json"}
        )
        assert refused.status_code == 422, bad


def test_sync_snapshot_uses_request_credentials_and_names_a_failing_store(
    tmp_path: Path, s3: SeaweedS3, bucket, monkeypatch
):
    _no_ambient_aws_credentials(monkeypatch, tmp_path)
    fs, name = bucket
    endpoint_only = {
        "client_kwargs": {"endpoint_url": s3.endpoint_url},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
    }
    settings = _settings(tmp_path, storage_options=endpoint_only, snapshot_url_prefix=f"s3://{name}/creds")
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        settings.fs_root.joinpath("a.txt").write_text("a")
        credentials = {"access_key_id": "any", "secret_access_key": "any", "region": "us-east-1"}
        done = requests.post(
            f"{server.url}/data/snapshot/s3", json={"snapshot_id": "snap_c", "s3_credentials": credentials}
        )
        assert done.status_code == 200, done.text
        assert fs.cat(f"{name}/creds/snap_c/filesystem/a.txt") == b"a"
        failed = requests.post(
            f"{server.url}/data/snapshot/s3", json={"format": "tar.gz", "snapshot_id": "snap_x"}
        )
    assert failed.status_code == 502, failed.text  # no credentials of its own
    detail = failed.json()["detail"]
    assert detail["code"] == "upload_failed" and f"s3://{name}/creds/snap_x.tar.gz" in detail["error"]
