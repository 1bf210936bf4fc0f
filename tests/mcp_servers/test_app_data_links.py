"""App data that links out of the world: mail, calendar and chat never follow it.

Each app's folder (or one of its files, or a chain of links) is made a link to a host
folder holding that app's data with a secret in it. Reads must not show the secret and
writes (sending mail, creating an event, posting) must leave the host folder unchanged.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.mcp_servers.helpers import make_world, open_session, text_of
from tests.mcp_servers.mail_world import mbox, message
from tests.mcp_servers.test_calendar_tools import TEAM_ICS
from tests.mcp_servers.test_chat_tools import ME, chat_groups, write_chat

SECRET = "HOST-APPDATA-SECRET-3e8b"
USER = {"user_email": "me@example.com", "user_name": "Mia Example"}


def _fingerprint(folder: Path) -> dict[str, str]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            found[str(path)] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _seen(result) -> str:
    return text_of(result) + repr(result.structured_content)


def _host_mail(tmp_path: Path) -> Path:
    host = tmp_path / "host_mail"
    host.mkdir()
    (host / "Inbox.mbox").write_bytes(
        mbox(
            message("host@corp.com", subject=f"Payroll {SECRET}", body=f"body {SECRET}", to="me@example.com")
        )
    )
    return host


@pytest.mark.parametrize("layout", ["folder_link", "file_link", "chain"])
def test_mail_never_reads_or_appends_through_a_link_out(tmp_path, layout):
    world = make_world(tmp_path)
    host = _host_mail(tmp_path)
    mail = world.apps_root / "mail"
    options = dict(USER)
    if layout == "folder_link":
        mail.symlink_to(host)
    elif layout == "file_link":
        mail.mkdir()
        (mail / "Inbox.mbox").symlink_to(host / "Inbox.mbox")
    else:  # each link looks inside on paper
        mail.mkdir()
        (mail / "up").symlink_to("..")  # .apps_data
        (mail / "x").symlink_to("up/..")  # the world folder
        (mail / "y").symlink_to("x/../host_mail")
        options["sent_mbox"] = "y/Inbox.mbox"
    before = _fingerprint(host)
    with open_session("mail", world, options=options) as session:
        assert SECRET not in _seen(session.call("list_mails", {}))
        assert SECRET not in _seen(session.call("search_mail", {"query": "Payroll"}))
        session.call("send_mail", {"to_email": "bob@corp.com", "subject": "hello", "body": "planted"})
    assert _fingerprint(host) == before


def test_calendar_never_reads_or_writes_through_a_link_out(tmp_path):
    world = make_world(tmp_path)
    host = tmp_path / "host_calendar"
    host.mkdir()
    (host / "team.ics").write_text(TEAM_ICS.replace("SUMMARY:", f"SUMMARY:{SECRET} ", 1))
    (world.apps_root / "calendar").symlink_to(host)
    before = _fingerprint(host)
    with open_session("calendar", world, options=USER) as session:
        assert SECRET not in _seen(session.call("list_events", {"limit": 50}))
        session.call(
            "create_event",
            {
                "summary": "planted",
                "start": {"dateTime": "2025-03-04T10:00:00Z"},
                "end": {"dateTime": "2025-03-04T11:00:00Z"},
            },
        )
    assert _fingerprint(host) == before


def test_chat_never_reads_or_writes_through_a_link_out(tmp_path):
    world = make_world(tmp_path)
    host = tmp_path / "host_chat"
    groups = chat_groups()
    groups[0]["messages"][0]["text"] = f"Kickoff {SECRET}"
    write_chat(host / "Google Chat", groups, user=ME, user_id="111122223333")
    (world.apps_root / "chat").symlink_to(host)
    before = _fingerprint(host)
    with open_session("chat", world, options=USER) as session:
        assert SECRET not in _seen(session.call("list_channels", {}))
        assert SECRET not in _seen(session.call("get_channel_history", {"channel_id": "Space AAAAgen01"}))
        session.call("post_message", {"channel_id": "Space AAAAgen01", "message": "planted"})
    assert _fingerprint(host) == before
