"""An environment serving all nine app servers (both modes) over a small world, for MCP clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from environment import EnvironmentServer, EnvironmentSettings
from mcp_servers import SERVER_NAMES, get_definition


def apps_config() -> dict[str, Any]:
    """Every server in individual mode under its own name, and again consolidated as ``c_<name>``."""
    user = {"user_email": "me@example.com", "user_name": "Me"}
    servers: dict[str, Any] = {name: {"server": name, "options": user} for name in SERVER_NAMES}
    servers.update(
        {f"c_{name}": {"server": name, "mode": "consolidated", "options": user} for name in SERVER_NAMES}
    )
    return {"mcpServers": servers}


def sample_calls() -> list[dict[str, Any]]:
    """Calls covering every server: writes of each office format, then reads of them."""
    xlsx = {"file_path": "/m.xlsx"}
    calls: list[dict[str, Any]] = [
        {"name": "filesystem_list_files", "arguments": {"path": "/"}},
        {"name": "filesystem_read_text_file", "arguments": {"file_path": "/notes.txt"}},
        {"name": "filesystem_get_file_metadata", "arguments": {"file_path": "/notes.txt"}},
        {"name": "filesystem_get_directory_tree", "arguments": {}},
        {
            "name": "spreadsheets_create_spreadsheet",
            "arguments": {
                "directory": "/",
                "file_name": "m.xlsx",
                "sheets": [{"name": "S", "headers": ["a", "b"], "rows": [[1, 2]]}],
            },
        },
        {"name": "spreadsheets_list_tabs_in_spreadsheet", "arguments": xlsx},
        {"name": "spreadsheets_read_tab", "arguments": {**xlsx, "tab_index": 0}},
        {
            "name": "spreadsheets_edit_spreadsheet",
            "arguments": {
                **xlsx,
                "operations": [{"type": "set_cell", "sheet": "S", "cell": "C1", "value": "x"}],
            },
        },
        {"name": "spreadsheets_read_csv", "arguments": {"file_path": "/table.csv"}},
        {
            "name": "documents_create_document",
            "arguments": {
                "directory": "/",
                "file_name": "d.docx",
                "content": [{"type": "paragraph", "text": "hello"}],
            },
        },
        {"name": "documents_get_document_overview", "arguments": {"file_path": "/d.docx"}},
        {"name": "documents_read_document_content", "arguments": {"file_path": "/d.docx"}},
        {
            "name": "pdfs_create_pdf",
            "arguments": {
                "directory": "/",
                "file_name": "p.pdf",
                "content": [{"type": "paragraph", "text": "hi"}],
            },
        },
        {"name": "pdfs_read_pdf_pages", "arguments": {"file_path": "/p.pdf"}},
        {"name": "pdfs_search_pdf", "arguments": {"file_path": "/p.pdf", "query": "hi"}},
        {
            "name": "presentations_create_deck",
            "arguments": {
                "directory": "/",
                "file_name": "s.pptx",
                "slides": [{"layout": "title", "title": "T"}],
            },
        },
        {"name": "presentations_read_completedeck", "arguments": {"file_path": "/s.pptx"}},
        {
            "name": "presentations_read_individualslide",
            "arguments": {"file_path": "/s.pptx", "slide_index": 0},
        },
        {
            "name": "mail_send_mail",
            "arguments": {"to_email": "b@example.com", "subject": "Hi", "body": "Hello"},
        },
        {"name": "mail_list_mails", "arguments": {}},
        {
            "name": "calendar_create_event",
            "arguments": {
                "summary": "Review",
                "start": {"dateTime": "2025-03-04T10:00:00", "timeZone": "UTC"},
                "end": {"dateTime": "2025-03-04T11:00:00", "timeZone": "UTC"},
            },
        },
        {"name": "calendar_list_events", "arguments": {}},
        {"name": "chat_list_channels", "arguments": {}},
        {"name": "chat_get_users", "arguments": {}},
        # Failures carry structured content too; it must match the same outputSchema.
        {
            "name": "filesystem_read_text_file",
            "arguments": {"file_path": "/../etc/passwd"},
            "expect_error": True,
        },
        {
            "name": "spreadsheets_read_tab",
            "arguments": {"file_path": "/none.xlsx", "tab_index": 0},
            "expect_error": True,
        },
    ]
    for name in SERVER_NAMES:
        tool = f"c_{name}_{get_definition(name).consolidated_name}"
        calls.append({"name": tool, "arguments": {"action": "help"}})
        calls.append({"name": f"{tool}_schema", "arguments": {}})
        calls.append({"name": f"{tool}_schema", "arguments": {"model": get_definition(name).tools[0].action}})
    calls.append({"name": "c_mail_mail", "arguments": {"action": "list", "limit": 5}})
    calls.append({"name": "c_mail_mail", "arguments": {"action": "nope"}, "expect_error": True})
    return calls


@pytest.fixture(scope="module")
def all_apps_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvironmentServer]:
    base: Path = tmp_path_factory.mktemp("world")
    settings = EnvironmentSettings(
        fs_root=base / "filesystem",
        apps_data_root=base / ".apps_data",
        json_logs=False,
        log_level="WARNING",
        preload_servers=False,
        ready_timeout_s=120,
    )
    settings.fs_root.mkdir(parents=True)
    (settings.fs_root / "notes.txt").write_text("quarterly notes\n")
    (settings.fs_root / "table.csv").write_text("region,sales\nEMEA,10\n")
    with EnvironmentServer(settings) as env:
        reply = httpx.post(env.url + "/apps", json=apps_config(), timeout=300)
        assert reply.status_code == 200, reply.text
        yield env
