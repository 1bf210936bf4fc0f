"""Mail server reading tools (list, read, search) in both modes, plus bad data handling."""

from __future__ import annotations

import pytest

from tests.mcp_servers.helpers import make_world, open_session, text_of
from tests.mcp_servers.mail_world import MAIN_MBOX, USER, USER_NAME, build_mail_world

ORDER = [
    "<latin@corp.com>",
    "<encoded@corp.com>",
    "<html@corp.com>",
    "<naive@corp.com>",
    "<q3@corp.com>",
    "<reply1@corp.com>",
    "<first@corp.com>",
    "<archived@corp.com>",
    "<baddate@corp.com>",
]


@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path)
    build_mail_world(world)
    return world


@pytest.fixture(params=["individual", "consolidated"])
def mail(request, world):
    with open_session(
        "mail", world, mode=request.param, options={"user_email": USER, "user_name": USER_NAME}
    ) as session:
        yield session


def ids(result: dict) -> list[str]:
    return [m["mail_id"] for m in result["mails"]]


def test_tool_surface(world):
    with open_session("mail", world) as session:
        assert session.tool_names() == [
            "forward_mail",
            "list_mails",
            "read_mail",
            "reply_all_mail",
            "reply_mail",
            "search_mail",
            "send_mail",
        ]
    with open_session("mail", world, mode="consolidated") as session:
        assert session.tool_names() == ["mail", "mail_schema"]
        actions = session.ok("mail", {"action": "help"})["actions"]
        assert [a["action"] for a in actions] == [
            "list",
            "read",
            "search",
            "send",
            "reply",
            "reply_all",
            "forward",
        ]


def test_list_mails_reads_every_mbox_newest_first(mail):
    listed = mail.ok("list_mails", {})
    assert ids(listed) == ORDER and listed["total"] == 9
    first = listed["mails"][4]
    assert first["from"] == "Bob Chen <bob@corp.com>" and first["cc"] == ["carol@corp.com"]
    assert first["date"] == "2024-03-05T09:30:00-05:00" and first["has_attachments"] is True
    assert listed["mails"][7]["mailbox"] == "Archive/old.mbox"


def test_list_mails_paginates_and_caps_limit(mail):
    page = mail.ok("list_mails", {"limit": 4, "offset": 4})
    assert ids(page) == ORDER[4:8] and page["has_more"] is True
    assert mail.error("list_mails", {"limit": 101})["code"] == "invalid_argument"


def test_malformed_message_is_skipped_and_reported_once(mail):
    first = mail.call("list_mails", {})
    notices = first.structured_content["notices"]
    assert any("message #4" in n and "no readable headers" in n for n in notices)
    assert any("unreadable Date" in n for n in notices)
    assert any("message #9" in n and "not UTF-8 (read as Windows-1252)" in n for n in notices)
    assert "Note: All mail Including Spam and Trash.mbox: message #4" in text_of(first)
    again = mail.ok("list_mails", {})
    assert "notices" not in again and len(again["mails"]) == 9


def test_headers_in_rfc2047_and_raw_cp1252_are_decoded(mail):
    by_id = {m["mail_id"]: m for m in mail.ok("list_mails", {})["mails"]}
    assert by_id["<encoded@corp.com>"]["subject"] == "Résumé review"
    assert by_id["<latin@corp.com>"]["subject"] == "Café réunion"


def test_read_mail_by_id_with_or_without_brackets(mail):
    read = mail.ok("read_mail", {"mail_id": "first@corp.com"})
    assert (
        read["subject"] == "Budget kickoff"
        and read["body"] == "Let's plan the budget.\nFrom now on we meet weekly."
    )
    assert mail.ok("read_mail", {"mail_id": "<reply1@corp.com>"})["in_reply_to"] == "<first@corp.com>"
    assert mail.ok("read_mail", {"mail_id": "  <reply1@corp.com> "})["thread_id"] == "first@corp.com"
    error = mail.error("read_mail", {"mail_id": "<nope@corp.com>"})
    assert error["code"] == "not_found" and error["argument"] == "mail_id"


def test_read_mail_html_and_attachments(mail, world):
    html = mail.ok("read_mail", {"mail_id": "html@corp.com"})
    assert html["body_format"] == "html" and "Café opens Monday" in html["body"] and "<b>" not in html["body"]
    q3 = mail.call("read_mail", {"mail_id": "q3@corp.com"})
    data = q3.structured_content
    assert data["body"] == "Numbers attached." and data["attachments"] == [
        {"filename": "q3.csv", "content_type": "text/csv", "size": 8}
    ]
    assert "- q3.csv (text/csv, 8 bytes)" in text_of(q3)


def test_read_mail_saves_attachments_into_the_filesystem(mail, world):
    saved = mail.ok("read_mail", {"mail_id": "q3@corp.com", "save_attachments_to": "/Downloads"})
    assert saved["attachments"][0]["saved_to"] == "/Downloads/q3.csv"
    assert (world.fs_root / "Downloads" / "q3.csv").read_bytes() == b"a,b\n1,2\n"
    again = mail.ok("read_mail", {"mail_id": "q3@corp.com", "save_attachments_to": "/Downloads"})
    assert again["attachments"][0]["saved_to"] == "/Downloads/q3 (1).csv"  # never overwrites
    assert (
        mail.error("read_mail", {"mail_id": "q3@corp.com", "save_attachments_to": "../out"})["code"]
        == "path_outside_root"
    )


def test_search_text_filters(mail):
    assert ids(mail.ok("search_mail", {"from_email": "CAROL"})) == ["<reply1@corp.com>"]
    assert ids(mail.ok("search_mail", {"to_email": "carol@corp.com"})) == ["<q3@corp.com>"]  # Cc counts
    assert ids(mail.ok("search_mail", {"subject": "budget"})) == ["<reply1@corp.com>", "<first@corp.com>"]
    assert ids(mail.ok("search_mail", {"body": "MEET WEEKLY"})) == ["<first@corp.com>"]
    assert ids(mail.ok("search_mail", {"body": "café opens"})) == ["<html@corp.com>"]
    assert ids(mail.ok("search_mail", {"query": "fabrikam"})) == ["<archived@corp.com>"]
    assert ids(mail.ok("search_mail", {"query": "archived message"})) == ["<archived@corp.com>"]
    assert ids(mail.ok("search_mail", {"subject": "budget", "from_email": "alice"})) == ["<first@corp.com>"]
    assert ids(mail.ok("search_mail", {"has_attachments": True})) == ["<q3@corp.com>"]


def test_search_date_filters_handle_aware_and_naive(mail):
    # after_date is inclusive from the start of the day (UTC); before_date is exclusive.
    assert ids(mail.ok("search_mail", {"after_date": "2024-03-06", "before_date": "2024-03-07"})) == [
        "<naive@corp.com>"
    ]
    assert ids(
        mail.ok("search_mail", {"after_date": "2024-03-05T14:30:00Z", "before_date": "2024-03-05T14:31:00"})
    ) == ["<q3@corp.com>"]
    assert ids(
        mail.ok("search_mail", {"after_date": "2024-03-05T09:00:00-05:00", "before_date": "2024-03-06"})
    ) == ["<q3@corp.com>"]
    assert ids(mail.ok("search_mail", {"before_date": "2024-03-02"})) == [
        "<first@corp.com>",
        "<archived@corp.com>",
    ]
    assert mail.error("search_mail", {"after_date": "last tuesday"})["code"] == "invalid_argument"
    assert (
        mail.error("search_mail", {"after_date": "2024-03-05", "before_date": "2024-03-01"})["code"]
        == "invalid_argument"
    )


def test_search_by_thread(mail):
    thread = mail.ok("search_mail", {"thread_id": "<first@corp.com>"})
    assert ids(thread) == ["<reply1@corp.com>", "<first@corp.com>"]


def test_empty_world_has_no_mail(tmp_path):
    world = make_world(tmp_path)
    with open_session("mail", world) as session:
        assert session.ok("list_mails", {}) == {
            "mails": [],
            "total": 0,
            "offset": 0,
            "limit": 50,
            "has_more": False,
        }


def test_external_change_is_picked_up(world):
    from tests.mcp_servers.mail_world import mbox, message

    with open_session("mail", world) as session:
        assert session.ok("list_mails", {})["total"] == 9
        path = world.apps_root / MAIN_MBOX
        path.write_bytes(mbox(message("only@corp.com", subject="Replaced by a populate")))
        listed = session.ok("list_mails", {})
        assert ids(listed) == ["<only@corp.com>", "<archived@corp.com>"]
        world.app_file(
            "mail/New/extra.mbox", mbox(message("extra@corp.com", date="Mon, 01 Apr 2024 10:00:00 +0000"))
        )
        assert ids(session.ok("list_mails", {}))[0] == "<extra@corp.com>"


def test_mbox_links_pointing_outside_the_mail_folder_are_ignored(world, tmp_path):
    import os

    from tests.mcp_servers.mail_world import mbox, message

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.mbox").write_bytes(mbox(message("secret@corp.com", subject="SECRET")))
    os.symlink(outside / "secret.mbox", world.apps_root / "mail" / "linked.mbox")
    os.symlink(outside, world.apps_root / "mail" / "linked_dir")
    with open_session("mail", world) as session:
        listed = session.ok("list_mails", {"limit": 100})
        assert listed["total"] == 9 and "SECRET" not in str(listed)


def test_recipients_given_as_json_text(world):
    with open_session("mail", world, options={"user_email": USER}) as session:
        sent = session.ok(
            "send_mail", {"to_email": '["bob@corp.com", "erin@corp.com"]', "subject": "s", "body": "b"}
        )
        assert sent["to"] == ["bob@corp.com", "erin@corp.com"]


def test_message_read_after_the_mbox_was_rewritten_in_the_same_second(world):
    """A populate that rewrites the file between the listing and the read: the id still works."""
    import os

    from tests.mcp_servers.mail_world import mbox, message

    with open_session("mail", world) as session:
        assert session.ok("list_mails", {})["total"] == 9
        path = world.apps_root / MAIN_MBOX
        stat = path.stat()
        new = mbox(
            message("padding@corp.com", body="x" * 50),
            message("first@corp.com", subject="Moved", body="moved"),
        )
        path.write_bytes(new + b"\n" * max(0, stat.st_size - len(new)))  # same size ...
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... same mtime: the cache cannot tell
        assert session.ok("read_mail", {"mail_id": "first@corp.com"})["body"] == "moved"
