"""Factories for environment tests: small MCP servers, archives, world trees."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastmcp import FastMCP

from environment import EnvironmentSettings

HERE = Path(__file__).parent


def initialize_message(client: str = "t", version: str = "2025-06-18") -> dict[str, Any]:
    """A JSON-RPC ``initialize`` request from a client named ``client`` (``id`` 1)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


def world_settings(world: Path, **overrides: Any) -> EnvironmentSettings:
    """EnvironmentSettings for tests over ``world`` (its ``filesystem`` and ``.apps_data``):
    readable logs, short timeouts, no background preload; ``overrides`` win."""
    values: dict[str, Any] = {
        "fs_root": world / "filesystem",
        "apps_data_root": world / ".apps_data",
        "json_logs": False,
        "log_level": "WARNING",
        "ready_timeout_s": 20,
        "drain_timeout_s": 10,
        "preload_servers": False,
    }
    return EnvironmentSettings(**{**values, **overrides})


STDIO_SERVER = HERE / "stdio_server.py"


def make_test_server(
    name: str, *, fs_root: Path, apps_data_root: Path, options: dict | None = None, **_: Any
):
    """A small in-process server: ``echo``, ``slow``, ``list_root``, plus ``block`` (a synchronous
    sleep) with option ``blocking_tool`` and the tools named in option ``extra_tools``."""
    options = options or {}
    if options.get("fail"):
        raise RuntimeError(f"server {name} refuses to start: {options['fail']}")
    server = FastMCP(name)

    @server.tool
    def echo(text: str) -> str:
        """Return the text, tagged with the server name."""
        return f"{name}:{text}"

    @server.tool
    async def slow(seconds: float) -> str:
        """Sleep, then answer (for in-flight calls during a swap)."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool
    def list_root() -> list[str]:
        """Names in the filesystem root the environment gave this server."""
        return sorted(os.listdir(fs_root))

    if options.get("blocking_tool"):

        @server.tool
        def block(seconds: float) -> str:
            """Hold a worker thread (a synchronous tool runs on the shared thread pool)."""
            time.sleep(seconds)
            return "unblocked"

    for extra in options.get("extra_tools", []):
        server.tool(lambda: "extra", name=extra)
    return server


def stdio_entry(**env: str) -> dict[str, Any]:
    """An Archipelago-style stdio server entry running tests/environment/stdio_server.py."""
    entry: dict[str, Any] = {"transport": "stdio", "command": sys.executable, "args": [str(STDIO_SERVER)]}
    if env:
        entry["env"] = env
    return entry


class RemoteMcpServer:
    """A FastMCP server served over Streamable HTTP on a free loopback port, in a thread."""

    def __init__(self, server: FastMCP) -> None:
        app = server.http_app(path="/mcp")
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on", ws="none")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> RemoteMcpServer:
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def tar_gz(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    """A tar.gz made of (name, content) files and raw TarInfo entries (links, devices...)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            if isinstance(member, tuple):
                name, content = member
                info = tarfile.TarInfo(name)
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
            else:
                archive.addfile(member)
    return buffer.getvalue()


def tree(root: Path) -> dict[str, bytes | str]:
    """Everything under ``root``: files by content, symlinks by target, dirs as 'dir'."""
    found: dict[str, bytes | str] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[key] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = path.read_bytes()
    return found


def link_member(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    """A tar symlink (or, with ``kind=tarfile.LNKTYPE``, hardlink) member."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@contextmanager
def guarded_world(tmp_path: Path, **limits: Any) -> Iterator[tuple[Any, Any]]:
    """A real environment over ``tmp_path/world`` with the given archive limits, a file
    ``existing.txt`` already in the world, and an HTTP client to it."""
    import httpx

    from environment import EnvironmentServer, EnvironmentSettings

    settings = EnvironmentSettings(
        fs_root=tmp_path / "world" / "filesystem",
        apps_data_root=tmp_path / "world" / ".apps_data",
        ratio_check_floor_bytes=256 * 1024,
        json_logs=False,
        log_level="WARNING",
        **limits,
    )
    settings.fs_root.mkdir(parents=True)
    (settings.fs_root / "existing.txt").write_text("before")
    with (
        EnvironmentServer(settings, server_factory=make_test_server) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        yield http, settings
