"""`atoll mcp NAME` runs a server standalone over stdio and Streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

from tests.mcp_servers.helpers import make_world
from tests.mcp_servers.mail_world import USER, build_mail_world

pytestmark = pytest.mark.slow

ATOLL = str(Path(sys.executable).parent / "atoll")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOLL_")}
    env.update(extra)
    return env


async def _call(transport, tool: str, arguments: dict):
    async with Client(transport) as client:
        names = sorted(t.name for t in await client.list_tools())
        result = await client.call_tool(tool, arguments, raise_on_error=False)
        return names, result


def test_stdio_uses_env_roots(tmp_path):
    world = make_world(tmp_path)
    world.file("hello.txt", "hi from the world")
    transport = StdioTransport(
        ATOLL,
        ["mcp", "filesystem", "--transport", "stdio"],
        env=_env(ATOLL_FS_ROOT=str(world.fs_root), ATOLL_APPS_DATA_ROOT=str(world.apps_root)),
    )
    names, result = asyncio.run(_call(transport, "read_text_file", {"file_path": "/hello.txt"}))
    assert "read_text_file" in names and len(names) == 6
    assert result.structured_content["content"] == "hi from the world"


def test_stdio_consolidated_mail_with_flags(tmp_path):
    world = make_world(tmp_path)
    build_mail_world(world)
    transport = StdioTransport(
        ATOLL,
        [
            "mcp",
            "mail",
            "--transport",
            "stdio",
            "--mode",
            "consolidated",
            "--fs-root",
            str(world.fs_root),
            "--apps-data-root",
            str(world.apps_root),
            "--user-email",
            USER,
        ],
        env=_env(),
    )
    names, result = asyncio.run(_call(transport, "mail", {"action": "search", "subject": "q3"}))
    assert names == ["mail", "mail_schema"]
    assert [m["mail_id"] for m in result.structured_content["mails"]] == ["<q3@corp.com>"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_http_transport(tmp_path):
    world = make_world(tmp_path)
    world.file("a/b.txt", "over http")
    port = _free_port()
    process = subprocess.Popen(
        [
            ATOLL,
            "mcp",
            "filesystem",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--fs-root",
            str(world.fs_root),
            "--apps-data-root",
            str(world.apps_root),
        ],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.stderr.read().decode()
            time.sleep(0.2)
        _, result = asyncio.run(
            _call(StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp"), "list_files", {"path": "/a"})
        )
        assert [e["name"] for e in result.structured_content["entries"]] == ["b.txt"]
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mcp", "nosuch"], "unknown MCP server 'nosuch'"),
        (["mcp", "filesystem", "--transport", "carrier-pigeon"], "--transport must be one of stdio, http"),
        (["mcp", "filesystem", "--mode", "both"], "mode must be one of individual, consolidated"),
        (["mcp", "filesystem", "-o", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_cli_errors_are_one_line(args, message):
    done = subprocess.run([ATOLL, *args], capture_output=True, text=True, env=_env(), timeout=60)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
