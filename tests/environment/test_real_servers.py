"""Our own app servers, in-process behind the gateway, seen by a real MCP client with stable names."""

from __future__ import annotations

import asyncio
import mailbox
from email.message import EmailMessage

import pytest
from fastmcp import Client

from environment import EnvironmentServer

USER = {"user_email": "alex@northwind.example", "user_name": "Alex Kim"}


@pytest.fixture
def real_env(settings):
    settings.fs_root.mkdir(parents=True)
    (settings.fs_root / "Reports").mkdir()
    (settings.fs_root / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M")
    mail_dir = settings.apps_data_root / "mail"
    mail_dir.mkdir(parents=True)
    box = mailbox.mbox(mail_dir / "All mail Including Spam and Trash.mbox")
    message = EmailMessage()
    message["From"], message["To"] = "dana@northwind.example", USER["user_email"]
    message["Subject"], message["Message-ID"] = "Q3 numbers", "<q3@northwind.example>"
    message["Date"] = "Mon, 06 Jan 2025 09:00:00 +0000"
    message.set_content("Please check the Q3 report.")
    box.add(message)
    box.close()
    with EnvironmentServer(settings) as env:  # the default factory: mcp_servers.create_server
        yield env


def test_mail_and_filesystem_tools_through_the_gateway(real_env):
    import httpx

    config = {
        "mcpServers": {
            "mail": {"transport": "inprocess", "server": "mail", "options": USER},
            "filesystem": {"transport": "inprocess", "server": "filesystem"},
        }
    }
    reply = httpx.post(f"{real_env.url}/apps", json=config, timeout=60)
    assert reply.status_code == 200, reply.text

    async def agent_view():
        async with Client(real_env.mcp_url) as mcp:
            names = {tool.name for tool in await mcp.list_tools()}
            assert {
                "mail_send_mail",
                "mail_list_mails",
                "filesystem_read_text_file",
                "filesystem_list_files",
            } <= names
            text = await mcp.call_tool("filesystem_read_text_file", {"file_path": "/Reports/q3.txt"})
            assert "4.2M" in str(text.content[0].text)
            mails = await mcp.call_tool("mail_list_mails", {})
            assert "Q3 numbers" in str(mails.content[0].text)

    asyncio.run(agent_view())
