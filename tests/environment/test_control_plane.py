"""The control plane against a browser and a network: Host allow-list (DNS rebinding),
cross-site posts, tokens beyond loopback, ATOLL_URL_ALLOW, slow clients, and /data/* keeping
its own threads while tool calls hold the shared pool."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from fastmcp import Client
from pydantic import ValidationError

from atoll.errors import AtollError
from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, tar_gz, tree


def _settings(base: EnvironmentSettings, **changes: object) -> EnvironmentSettings:
    return EnvironmentSettings(**{**base.model_dump(), **changes})


@pytest.fixture
def serve(settings: EnvironmentSettings) -> Iterator:
    servers: list[EnvironmentServer] = []

    def start(**changes: object) -> EnvironmentServer:
        server = EnvironmentServer(_settings(settings, **changes), server_factory=make_test_server).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# -- Host header --------------------------------------------------------------------------


def test_a_foreign_host_header_is_421_and_changes_nothing(client, env_server):
    for method, path in (("GET", "/apps"), ("POST", "/apps"), ("POST", "/data/snapshot"), ("GET", "/health")):
        reply = client.request(method, path, headers={"Host": f"rebound.example:{env_server.port}"})
        assert reply.status_code == 421, (path, reply.text)
        assert "ATOLL_ALLOWED_HOSTS" in reply.json()["detail"]
    reply = client.post(
        "/apps",
        json={"mcpServers": {"evil": {"transport": "stdio", "command": "touch", "args": ["/tmp/pwned"]}}},
        headers={"Host": "rebound.example"},
    )
    assert reply.status_code == 421
    assert client.get("/apps").json()["servers"] == []


def test_localhost_addresses_and_listed_hosts_are_served(serve):
    env = serve(allowed_hosts="env.internal, .svc.cluster.local")
    with httpx.Client(base_url=env.url, timeout=30) as http:
        for host in (
            f"localhost:{env.port}",
            f"127.0.0.1:{env.port}",
            "[::1]",
            "10.1.2.3:8080",
            "env.internal",
            "env-7.trials.svc.cluster.local:8080",
        ):
            assert http.get("/apps", headers={"Host": host}).status_code == 200, host
        for host in ("env.internal.evil.example", "svc.cluster.local.evil.example", "internal"):
            assert http.get("/apps", headers={"Host": host}).status_code == 421, host


# -- cross-site posts ---------------------------------------------------------------------


def test_a_cross_site_multipart_replace_is_refused(client, env_server, settings):
    client.post("/data/populate", files={"archive": ("w.tar.gz", tar_gz([("keep.txt", b"mine")]))})
    before = tree(settings.fs_root)
    archive = {"archive": ("w.tar.gz", tar_gz([("evil.txt", b"x")]))}
    for headers in (
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of the same host is another origin
        {"Origin": "null"},
    ):
        reply = client.post("/data/populate", params={"mode": "replace"}, files=archive, headers=headers)
        assert reply.status_code == 403, (headers, reply.text)
    assert tree(settings.fs_root) == before
    same_origin = {"Origin": env_server.url, "Sec-Fetch-Site": "same-origin"}
    reply = client.post("/data/populate", params={"mode": "replace"}, files=archive, headers=same_origin)
    assert reply.status_code == 200, reply.text


# -- tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["ATOLL_ENV_TOKEN", "ATOLL_MCP_TOKEN"])
def test_an_empty_token_is_a_configuration_error(monkeypatch, tmp_path, variable):
    monkeypatch.setenv(variable, "  ")
    with pytest.raises(ValidationError) as refused:
        EnvironmentSettings(fs_root=tmp_path / "fs", apps_data_root=tmp_path / "ad")
    assert f"{variable} is set but empty" in str(refused.value)


def test_serving_beyond_loopback_needs_a_token(settings):
    with pytest.raises(AtollError) as refused:
        EnvironmentServer(settings, host="0.0.0.0", server_factory=make_test_server)
    assert refused.value.code == "insecure_bind" and "ATOLL_ENV_TOKEN" in refused.value.message
    with EnvironmentServer(
        _settings(settings, env_token="t0ken"), host="0.0.0.0", server_factory=make_test_server
    ) as env:
        reply = httpx.get(f"http://127.0.0.1:{env.port}/apps", headers={"Authorization": "Bearer t0ken"})
        assert reply.status_code == 200


# -- ATOLL_URL_ALLOW ----------------------------------------------------------------------


def test_url_sources_and_snapshot_destinations_obey_the_allow_list(serve, tmp_path):
    allowed, other = tmp_path / "worlds", tmp_path / "host"
    allowed.mkdir()
    other.mkdir()
    (allowed / "w.tar.gz").write_bytes(tar_gz([("ok.txt", b"ok")]))
    (other / "secret.tar.gz").write_bytes(tar_gz([("secret.txt", b"host")]))
    (allowed / "escape").symlink_to(other)
    env = serve(url_allow=f"file://{allowed}/,s3://my-bucket/")
    with httpx.Client(base_url=env.url, timeout=30) as http:

        def populate(url: str) -> httpx.Response:
            return http.post("/data/populate", json={"sources": [{"url": url}]})

        assert populate(f"file://{allowed}/w.tar.gz").status_code == 200
        for url in (
            f"file://{other}/secret.tar.gz",
            f"file://{allowed}/../host/secret.tar.gz",
            f"file://{allowed}/escape/secret.tar.gz",
            str(other / "secret.tar.gz"),
            "s3://my-bucket-evil/w.tar.gz",
            "s3://my-bucket/%2e%2e/w.tar.gz",
            f"simplecache::file://{allowed}/w.tar.gz",
        ):
            reply = populate(url)
            assert reply.status_code == 403, (url, reply.text)
            assert repr(url) in reply.json()["detail"]["error"]
        refused = http.post("/data/snapshot/s3", json={"url": f"file://{other}/snap.tar.gz"})
        assert refused.status_code == 403 and not (other / "snap.tar.gz").exists()
        sneaky = http.post(
            "/data/snapshot/s3",
            json={"url": "s3://my-bucket/s.tar.gz", "storage_options": {"endpoint_url": "http://x"}},
        )
        assert sneaky.status_code == 403
        assert (
            http.post("/data/snapshot/s3", json={"url": f"file://{allowed}/snap.tar.gz"}).status_code == 200
        )
        assert (allowed / "snap.tar.gz").exists()


# -- slow clients ---------------------------------------------------------------------------


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return False, received
    return True, received


@pytest.mark.serial
def test_a_client_that_never_finishes_its_headers_is_dropped(serve):
    env = serve(header_timeout_s=1)
    with (
        socket.create_connection(("127.0.0.1", env.port)) as silent,
        socket.create_connection(("127.0.0.1", env.port)) as slow,
    ):
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        started = time.monotonic()
        assert _closed_within(silent, 5)[0]
        assert _closed_within(slow, 5)[0]
        assert time.monotonic() - started < 5
    assert httpx.get(f"{env.url}/health").status_code == 200


def test_a_client_that_stalls_in_its_body_gets_408(serve):
    env = serve(body_timeout_s=1)
    with socket.create_connection(("127.0.0.1", env.port)) as sock:
        sock.sendall(
            b"POST /data/populate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/gzip\r\n"
            b"Content-Length: 100000\r\n\r\n" + b"\x1f\x8b" + bytes(100)
        )
        closed, received = _closed_within(sock, 10)
    assert closed and received.startswith(b"HTTP/1.1 408"), received[:200]


# -- threads --------------------------------------------------------------------------------


@pytest.mark.serial
def test_data_routes_answer_while_tool_calls_hold_every_shared_thread(client, env_server):
    client.post("/apps", json={"mcpServers": {"t": {"server": "t", "options": {"blocking_tool": True}}}})
    hold = 12.0

    async def flood() -> None:
        async with Client(env_server.mcp_url, timeout=60) as mcp:
            await asyncio.gather(*(mcp.call_tool("t_block", {"seconds": hold}) for _ in range(48)))

    flooding = threading.Thread(target=asyncio.run, args=(flood(),), daemon=True)
    flooding.start()
    time.sleep(3)  # the calls are in and hold anyio's default pool (40 threads)
    started = time.monotonic()
    populated = client.post("/data/populate", files={"archive": ("w.tar.gz", tar_gz([("a.txt", b"1")]))})
    snapshot = client.post("/data/snapshot")
    elapsed = time.monotonic() - started
    flooding.join(timeout=60)
    assert populated.status_code == 200 and snapshot.status_code == 200
    assert elapsed < hold / 3, f"/data/* waited {elapsed:.1f} s behind the tool calls"
