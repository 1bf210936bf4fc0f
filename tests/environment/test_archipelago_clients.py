"""Archipelago's clients against atoll's environment, their HTTP calls reproduced as they make them.

The calls are those of Archipelago's ``environment/example.py`` and
``examples/{simple_task,hugging_face_task}/main.py`` (``requests``/``httpx``, same URLs, same
bodies, same checks on the replies), plus its agent runner's MCP URL (``{ENV_URL}/mcp/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tarfile
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from atoll import __version__
from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import initialize_message, make_test_server, stdio_entry, tar_gz


def _zip_to_tar_gz(zip_bytes: bytes, strip_prefix: str = "filesystem/") -> bytes:
    """What simple_task's ``zip_to_tar_gz`` sends: zip members, prefix stripped, dirs as dirs."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as zf, tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name in zf.namelist():
            new_name = name[len(strip_prefix) :] if name.startswith(strip_prefix) else name
            if not new_name:
                continue
            info = tarfile.TarInfo(new_name)
            if name.endswith("/"):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = zf.read(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _world_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("filesystem/", "")
        zf.writestr("filesystem/Reports/", "")
        zf.writestr("filesystem/Reports/q3.txt", "q3 revenue 12")
        zf.writestr("filesystem/readme.md", "# world")
    return buffer.getvalue()


def test_simple_task_script_calls_work_unchanged(
    env_server: EnvironmentServer, settings: EnvironmentSettings
):
    env_url = env_server.url
    assert requests.get(f"{env_url}/health", timeout=5).status_code == 200  # wait_for_health
    assert requests.get(f"{env_url}/", timeout=5).status_code == 200

    resp = requests.post(
        f"{env_url}/data/populate",
        files={"archive": ("world.tar.gz", io.BytesIO(_zip_to_tar_gz(_world_zip())), "application/gzip")},
        params={"subsystem": "filesystem"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["objects_added"] == 2
    assert (settings.fs_root / "Reports/q3.txt").read_text() == "q3 revenue 12"

    mcp_config = {"mcpServers": {"filesystem_server": {**stdio_entry(GREETING="fs"), "cwd": str(Path.cwd())}}}
    resp = requests.post(f"{env_url}/apps", json=mcp_config)
    resp.raise_for_status()
    assert resp.json()["servers"] == ["filesystem_server"]  # example.py prints result['servers']

    # The agent runner is given f"{ENV_URL}/mcp/": it must be served there, not redirected.
    assert httpx.post(f"{env_url}/mcp/", json={}, follow_redirects=False).status_code != 307
    assert _call_tool(f"{env_url}/mcp/", "filesystem_server_echo", {"text": "hi"}) == "fs:hi"

    resp = requests.post(f"{env_url}/data/snapshot", stream=True)
    resp.raise_for_status()
    disposition = resp.headers.get("Content-Disposition", "")
    filename = disposition.split("filename=")[1].strip('"')  # example.py's parsing
    assert filename.startswith("snap_") and filename.endswith(".tar.gz")
    archive = b"".join(resp.iter_content(chunk_size=65536))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:  # tar_gz_to_zip's reading
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert files["filesystem/Reports/q3.txt"] == b"q3 revenue 12"


def test_hugging_face_task_populates_each_subsystem_and_streams_the_snapshot(
    env_server: EnvironmentServer, settings: EnvironmentSettings
):
    env_url = env_server.url
    for subsystem, members in (
        ("filesystem", [("docs/brief.txt", b"brief")]),
        (".apps_data", [("mail/inbox.mbox", b"From a@b\n\nhello\n")]),
    ):
        resp = httpx.post(
            f"{env_url}/data/populate",
            files={"archive": (f"world_{subsystem}.tar.gz", tar_gz(members), "application/gzip")},
            params={"subsystem": subsystem},
            timeout=600.0,
        )
        assert resp.status_code == 200, resp.text
    assert (settings.apps_data_root / "mail/inbox.mbox").exists()
    with httpx.stream("POST", f"{env_url}/data/snapshot") as resp:
        resp.raise_for_status()
        archive = b"".join(resp.iter_bytes(chunk_size=65536))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert names == {"filesystem/docs/brief.txt", ".apps_data/mail/inbox.mbox"}


def test_root_names_atoll_and_mcp_server_info_names_atoll(env_server: EnvironmentServer):
    root = httpx.get(env_server.url + "/")
    assert root.status_code == 200 and root.json()["version"] == __version__

    async def server_info() -> tuple[str, str]:
        async with _session(env_server.mcp_url) as session:
            info = await session.initialize()
            return info.server_info.name, info.server_info.version

    assert asyncio.run(server_info()) == ("atoll-environment", __version__)


@pytest.mark.parametrize("tool_names", ["atoll", "archipelago"])
def test_tool_names_option(settings: EnvironmentSettings, tool_names: str):
    settings.tool_names = tool_names  # type: ignore[assignment]
    with EnvironmentServer(settings, server_factory=make_test_server) as env:
        one = httpx.post(env.url + "/apps", json={"mcpServers": {"files": {"server": "x"}}}, timeout=30)
        assert one.status_code == 200, one.text
        expected = "echo" if tool_names == "archipelago" else "files_echo"
        assert expected in one.json()["tools"]
        assert _call_tool(env.mcp_url, expected, {"text": "a"}) == "x:a"
        two = httpx.post(
            env.url + "/apps",
            json={"mcpServers": {"files": {"server": "x"}, "more": {"server": "y"}}},
            timeout=30,
        )
        # With several servers both namings prefix: Archipelago's are {server}_{tool} too.
        assert {"files_echo", "more_echo"} <= set(two.json()["tools"])


def test_connected_sessions_are_told_when_the_tools_change(
    env_server: EnvironmentServer, client: httpx.Client
):
    assert client.post("/apps", json={"mcpServers": {"a": {"server": "a"}}}).status_code == 200

    async def session_sees_swap() -> tuple[bool, list[str]]:
        changed = asyncio.Event()

        async def on_message(message: object) -> None:
            if type(message).__name__ == "ToolListChangedNotification" or "tools/list_changed" in repr(
                message
            ):
                changed.set()

        async with _session(env_server.mcp_url, message_handler=on_message) as session:
            init = await session.initialize()
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
            await session.list_tools()
            await asyncio.sleep(0.2)  # let the client open its standalone GET stream
            reply = await asyncio.to_thread(client.post, "/apps", json={"mcpServers": {"b": {"server": "b"}}})
            assert reply.status_code == 200
            await asyncio.wait_for(changed.wait(), 10)
            tools = await session.list_tools()
            return changed.is_set(), sorted(t.name for t in tools.tools)

    seen, names = asyncio.run(session_sees_swap())
    assert seen and "b_echo" in names and "a_echo" not in names


def _call_tool(url: str, name: str, arguments: dict) -> str:
    async def call() -> str:
        async with _session(url) as session:
            await session.initialize()
            result = await session.call_tool(name, arguments)
            assert not result.is_error, result
            return result.content[0].text

    return asyncio.run(call())


@contextlib.asynccontextmanager
async def _session(url: str, **options: Any) -> AsyncIterator[ClientSession]:
    """An MCP Python SDK session over Streamable HTTP (not yet initialised)."""
    async with (
        streamable_http_client(url) as (read, write, *_),
        ClientSession(read, write, **options) as session,
    ):
        yield session


def test_a_session_without_the_get_stream_sees_the_new_tools_on_its_next_list(
    env_server: EnvironmentServer, client: httpx.Client
):
    """No standalone GET stream, JSON answers: nothing can carry tools/list_changed to this
    client (documented), but its session survives the swap and its next tools/list is current."""
    assert client.post("/apps", json={"mcpServers": {"a": {"server": "a"}}}).status_code == 200
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=env_server.mcp_url, headers=headers, timeout=30) as mcp:
        init = mcp.post(
            "",
            json=initialize_message("plain"),
        )
        assert init.status_code == 200, init.text
        session = {"mcp-session-id": init.headers["mcp-session-id"]}
        assert (
            mcp.post(
                "", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
            ).status_code
            == 202
        )

        def tool_names(request_id: int) -> list[str]:
            reply = mcp.post(
                "", json={"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}, headers=session
            )
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
            return sorted(tool["name"] for tool in reply.json()["result"]["tools"])

        assert "a_echo" in tool_names(2)
        assert client.post("/apps", json={"mcpServers": {"b": {"server": "b"}}}).status_code == 200
        after = tool_names(3)
    assert "b_echo" in after and "a_echo" not in after
