"""Calendar and chat (with mail and filesystem) behind the environment gateway, seen by a real
MCP client over HTTP with stable ``{server}_{tool}`` names, in both modes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastmcp import Client

from environment import EnvironmentServer, EnvironmentSettings
from tests.mcp_servers.test_calendar_tools import TEAM_ICS
from tests.mcp_servers.test_chat_tools import GENERAL, ME, chat_groups, write_chat

USER = {"user_email": ME["email"], "user_name": ME["name"]}


@pytest.fixture
def environment(tmp_path):
    settings = EnvironmentSettings(
        fs_root=tmp_path / "world" / "filesystem",
        apps_data_root=tmp_path / "world" / ".apps_data",
        json_logs=False,
        log_level="WARNING",
        ready_timeout_s=20,
        drain_timeout_s=10,
        preload_servers=False,
    )
    settings.fs_root.mkdir(parents=True)
    (settings.apps_data_root / "calendar").mkdir(parents=True)
    (settings.apps_data_root / "calendar" / "team.ics").write_bytes(TEAM_ICS.encode())
    write_chat(
        settings.apps_data_root / "chat" / "Google Chat", chat_groups(), user=ME, user_id="111122223333"
    )
    with EnvironmentServer(settings) as env:
        yield env


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
def test_calendar_and_chat_through_the_gateway(environment, mode):
    servers = {
        name: {"transport": "inprocess", "server": name, "mode": mode, "options": USER}
        for name in ("calendar", "chat", "mail", "filesystem")
    }
    reply = httpx.post(f"{environment.url}/apps", json={"mcpServers": servers}, timeout=60)
    assert reply.status_code == 200, reply.text

    async def agent_view() -> None:
        async with Client(environment.mcp_url) as mcp:
            names = {tool.name for tool in await mcp.list_tools()}
            if mode == "individual":
                assert {
                    "calendar_list_events",
                    "calendar_create_event",
                    "calendar_read_event",
                    "calendar_update_event",
                    "calendar_delete_event",
                    "chat_list_channels",
                    "chat_get_channel_history",
                    "chat_get_thread_replies",
                    "chat_get_user_profile",
                    "chat_get_users",
                    "chat_post_message",
                    "chat_reply_to_thread",
                    "chat_add_reaction",
                    "chat_delete_post",
                    "chat_search_messages",
                    "mail_send_mail",
                    "filesystem_list_files",
                } <= names
                created = await mcp.call_tool(
                    "calendar_create_event",
                    {"summary": "Sync", "start": "2025-03-04T10:00:00Z", "end": "2025-03-04T10:30:00Z"},
                )
                posted = await mcp.call_tool("chat_post_message", {"channel_id": GENERAL, "message": "hello"})
            else:
                assert {
                    "calendar_calendar",
                    "calendar_calendar_schema",
                    "chat_chat",
                    "chat_chat_schema",
                } <= names
                created = await mcp.call_tool(
                    "calendar_calendar",
                    {
                        "action": "create",
                        "summary": "Sync",
                        "start": "2025-03-04T10:00:00Z",
                        "end": "2025-03-04T10:30:00Z",
                    },
                )
                posted = await mcp.call_tool(
                    "chat_chat", {"action": "post", "channel_id": GENERAL, "message": "hello"}
                )
            assert created.structured_content["calendarFile"] == "me@example.com.ics"
            assert posted.structured_content["author"]["email"] == ME["email"]

    asyncio.run(agent_view())
