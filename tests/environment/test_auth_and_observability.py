"""Bearer tokens on the control plane and on /mcp; Prometheus metrics; JSON logs."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from fastmcp import Client

from environment import EnvironmentServer, EnvironmentSettings
from environment.logs import JsonFormatter
from tests.environment.factories import make_test_server, tar_gz

ENV_TOKEN = "control-plane-secret"
MCP_TOKEN = "agent-secret"


@pytest.fixture
def guarded(settings: EnvironmentSettings) -> Iterator[EnvironmentServer]:
    settings = EnvironmentSettings(
        **{**settings.model_dump(), "env_token": ENV_TOKEN, "mcp_token": MCP_TOKEN}
    )
    with EnvironmentServer(settings, server_factory=make_test_server) as env:
        yield env


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


CONTROL_PLANE = [
    ("GET", "/apps"),
    ("POST", "/apps"),
    ("POST", "/data/populate"),
    ("POST", "/data/snapshot"),
    ("POST", "/data/snapshot/s3"),
    ("POST", "/data/snapshot/manifest"),
    ("POST", "/data/snapshot/delta"),
    ("GET", "/metrics"),
]


def test_control_plane_requires_the_env_token_and_health_stays_open(guarded):
    with httpx.Client(base_url=guarded.url, timeout=30) as http:
        assert http.get("/health").status_code == 200
        for method, path in CONTROL_PLANE:
            assert http.request(method, path).status_code == 401, path
            assert http.request(method, path, headers=_bearer("wrong")).status_code == 401, path
            assert http.request(method, path, headers=_bearer(MCP_TOKEN)).status_code == 401, path
        ok = http.post("/apps", json={"mcpServers": {"t": {"server": "t"}}}, headers=_bearer(ENV_TOKEN))
        assert ok.status_code == 200
        populated = http.post(
            "/data/populate",
            files={"archive": ("a.tar.gz", tar_gz([("a.txt", b"1")]))},
            headers=_bearer(ENV_TOKEN),
        )
        assert populated.status_code == 200
        assert http.post("/data/snapshot", headers=_bearer(ENV_TOKEN)).status_code == 200
        assert http.post("/data/snapshot/manifest", headers=_bearer(ENV_TOKEN)).status_code == 200
        assert http.post("/data/snapshot/delta", headers=_bearer(ENV_TOKEN)).status_code == 200


def test_mcp_takes_its_own_token(guarded):
    with httpx.Client(base_url=guarded.url, timeout=30) as http:
        http.post("/apps", json={"mcpServers": {"t": {"server": "t"}}}, headers=_bearer(ENV_TOKEN))
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        for headers in ({}, _bearer(ENV_TOKEN), _bearer("wrong")):
            reply = http.post(
                "/mcp", json=init, headers={**headers, "Accept": "application/json, text/event-stream"}
            )
            assert reply.status_code == 401

    async def call() -> str:
        async with Client(guarded.mcp_url, auth=MCP_TOKEN) as mcp:
            return (await mcp.call_tool("t_echo", {"text": "ok"})).content[0].text

    assert asyncio.run(call()) == "t:ok"


def test_without_tokens_everything_is_open(client, env_server):
    assert client.get("/apps").status_code == 200
    assert client.post("/data/snapshot").status_code == 200


def test_metrics_count_tool_calls_populate_and_snapshot(client, env_server):
    client.post("/apps", json={"mcpServers": {"m": {"server": "m"}}})

    async def calls():
        async with Client(env_server.mcp_url) as mcp:
            for _ in range(3):
                await mcp.call_tool("m_echo", {"text": "x"})
            await mcp.call_tool("m_slow", {"seconds": "not a number"}, raise_on_error=False)

    asyncio.run(calls())
    client.post("/data/populate", files={"archive": ("a.tar.gz", tar_gz([("a.txt", b"12345")]))})
    client.post("/data/snapshot")
    text = client.get("/metrics").text
    assert 'atoll_env_tool_calls_total{outcome="ok",server="m",tool="echo"} 3.0' in text
    assert 'atoll_env_tool_call_seconds_count{server="m",tool="echo"} 3.0' in text
    assert "atoll_env_populate_bytes_total 5.0" in text
    assert 'atoll_env_populate_seconds_count{outcome="ok"} 1.0' in text
    assert 'atoll_env_snapshot_seconds_count{outcome="ok"} 1.0' in text
    assert "atoll_env_gateway_tools 3.0" in text


def test_logs_are_one_json_object_per_line_with_extra_fields():
    record = logging.makeLogRecord(
        {"name": "environment.app", "levelname": "INFO", "msg": "apps configured", "servers": ["mail"]}
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "apps configured" and entry["servers"] == ["mail"]
    assert entry["level"] == "info" and entry["logger"] == "environment.app" and "time" in entry
