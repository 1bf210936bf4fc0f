"""A small MCP gateway stand-in (FastMCP over Streamable HTTP with a bearer token) and helpers.

Tool names follow the gateway's ``{server}_{tool}`` convention.  The real environment is
exercised in test_environment_integration.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.utilities.types import Image

from tests.served_app import ServedApp

TOKEN = "test-gateway-token"
FACT = "The wire reference for the Halvorsen settlement is HX-40917-Q and the amount is $48,213.07."
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4"
    b"\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


@dataclass
class FakeWorld:
    files: dict[str, str] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)


def build_server(world: FakeWorld) -> FastMCP:
    mcp = FastMCP("fake-gateway")

    @mcp.tool(name="filesystem_read_text_file")
    def read_text_file(file_path: str) -> str:
        """Read a text file of the workspace.

        Returns its content."""
        if file_path not in world.files:
            raise ValueError(f"no such file: {file_path}")
        return world.files[file_path]

    @mcp.tool(name="filesystem_list_files")
    def list_files(path: str = "/") -> list[str]:
        """List files under a folder."""
        return sorted(name for name in world.files if name.startswith(path))

    @mcp.tool(name="mail_search_mail")
    def search_mail(query: str) -> str:
        """Search the mailbox."""
        return f"1 message matches {query!r}:\nFrom: ap@halvorsen.example\nSubject: Settlement\n{FACT}"

    @mcp.tool(name="mail_send_mail")
    def send_mail(to_email: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        world.sent.append({"to": to_email, "subject": subject, "body": body})
        return f"sent to {to_email}"

    @mcp.tool(name="code_sleep")
    async def sleep(seconds: float) -> str:
        """Sleep (a slow tool)."""
        await asyncio.sleep(seconds)
        return "woke up"

    @mcp.tool(name="pdfs_render_page")
    def render_page(file_path: str) -> Image:
        """Render a PDF page as an image."""
        return Image(data=PNG, format="png")

    @mcp.tool(name="filesystem_read_big_file")
    def read_big_file() -> str:
        """A large file (for truncation)."""
        return "".join(f"line {n:05d}\n" for n in range(5000))

    return mcp


class _BearerAuth:
    """Rejects requests without the bearer token, as the environment does when a token is set."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


@dataclass
class Gateway:
    url: str
    token: str
    world: FakeWorld


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    world = FakeWorld(files={"/notes/todo.txt": "call the bank", "/Reports/q3.txt": "Q3 revenue: 1,204,330"})
    app = build_server(world).http_app(path="/mcp")
    with ServedApp(_BearerAuth(app, TOKEN)) as served:
        yield Gateway(url=f"http://127.0.0.1:{served.port}/mcp", token=TOKEN, world=world)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"name": name, "arguments": arguments}


def tool_messages(trajectory: Any) -> dict[str, str]:
    """tool_call_id -> content of the answering tool message."""
    return {m["tool_call_id"]: m["content"] for m in trajectory.messages if m.get("role") == "tool"}


def assert_every_call_answered_once(trajectory: Any) -> None:
    asked = [c["id"] for m in trajectory.messages for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in trajectory.messages if m.get("role") == "tool"]
    assert sorted(asked) == sorted(answered), (asked, answered)
    assert len(set(answered)) == len(answered)


# --- the real environment and the sample benchmark ------------------------------------------

MCP_TOKEN = "world-token"


def start_environment(fs_root: Path, apps_data_root: Path, user: dict[str, str], names: Any = None) -> Any:
    """A real environment over the two roots with our app servers in process (``names``: all)."""
    import httpx

    from environment import EnvironmentServer, EnvironmentSettings
    from mcp_servers import SERVER_NAMES

    settings = EnvironmentSettings(
        fs_root=fs_root,
        apps_data_root=apps_data_root,
        mcp_token=MCP_TOKEN,
        json_logs=False,
        log_level="WARNING",
        ready_timeout_s=120,  # the shared test machine can be very busy
    )
    env = EnvironmentServer(settings, startup_timeout_s=120).start()
    servers = {
        name: {"transport": "inprocess", "server": name, "options": dict(user)}
        for name in (names or SERVER_NAMES)
    }
    reply = httpx.post(f"{env.url}/apps", json={"mcpServers": servers}, timeout=120)
    if reply.status_code != 200:
        env.stop()
        raise RuntimeError(f"/apps failed: {reply.text}")
    return env


def sample_root() -> Path:
    """The generated sample benchmark (seed 0), once per test process; read-only."""
    from tests.shared_sample import generated_sample

    return generated_sample()


@pytest.fixture(scope="session")
def sample_benchmark() -> Any:
    from atoll.loader import load_benchmark

    return load_benchmark(sample_root())
