"""Mail, calendar and chat of every world: counts and the variety the issue asks for."""

from __future__ import annotations

import json
import mailbox
import re
from datetime import date, datetime
from email.header import decode_header, make_header
from email.utils import getaddresses

import icalendar
import pytest

from .conftest import CONSULTING, DEAL

WORLDS = [CONSULTING, DEAL]


def _messages(root):
    boxes = sorted((root / ".apps_data" / "mail").rglob("*.mbox"))
    assert boxes
    return [message for box in boxes for message in mailbox.mbox(box)]


@pytest.mark.parametrize("world_id", WORLDS)
def test_mbox_has_threads_cc_forwards_non_ascii_and_html(worlds, world_id):
    messages = _messages(worlds[world_id])
    assert len(messages) >= 40
    ids = {m["Message-ID"] for m in messages}
    assert len(ids) == len(messages)
    replies = [m for m in messages if m["In-Reply-To"]]
    assert len(replies) >= 10 and all(m["In-Reply-To"] in ids for m in replies)
    assert all(m["References"].split()[-1] == m["In-Reply-To"] for m in replies)
    assert sum(1 for m in messages if m["Cc"]) >= 5
    assert any(str(make_header(decode_header(m["Subject"]))).startswith("Fwd:") for m in messages)
    names = [str(make_header(decode_header(m["From"]))) for m in messages]
    names += [str(make_header(decode_header(m["To"]))) for m in messages]
    assert any(re.search(r"[^\x00-\x7f]", n) for n in names)
    html = [m for m in messages if any(part.get_content_type() == "text/html" for part in m.walk())]
    assert html
    assert all(m.get_from() for m in messages)


@pytest.mark.parametrize("world_id", WORLDS)
def test_calendar_has_recurring_all_day_zoned_events_with_attendees_and_alarms(worlds, world_id):
    files = sorted((worlds[world_id] / ".apps_data" / "calendar").rglob("*.ics"))
    events = []
    for path in files:
        calendar = icalendar.Calendar.from_ical(path.read_bytes())
        events += calendar.walk("VEVENT")
    assert len(events) >= 20
    assert any(e.get("RRULE") for e in events)
    starts = [e.decoded("DTSTART") for e in events]
    assert any(isinstance(s, date) and not isinstance(s, datetime) for s in starts)
    zones = {str(s.tzinfo) for s in starts if isinstance(s, datetime)}
    assert len(zones) >= 2
    assert any(e.get("ATTENDEE") for e in events)
    assert any(e.walk("VALARM") for e in events)
    user_email = {CONSULTING: "priya.raman@meridianpartners.example", DEAL: "elena.varga@corvane.example"}[
        world_id
    ]
    assert (worlds[world_id] / ".apps_data" / "calendar" / f"{user_email}.ics").is_file()


@pytest.mark.parametrize("world_id", WORLDS)
def test_chat_export_has_spaces_dms_threads_reactions_and_a_deletion(worlds, world_id):
    root = worlds[world_id] / ".apps_data" / "chat" / "Google Chat"
    groups = sorted((root / "Groups").iterdir())
    spaces = [g for g in groups if g.name.startswith("Space ")]
    dms = [g for g in groups if g.name.startswith("DM ")]
    assert len(spaces) >= 3 and dms
    total = 0
    threaded = reacted = deleted = False
    for group in groups:
        info = json.loads((group / "group_info.json").read_text(encoding="utf-8"))
        assert ("name" in info) == group.name.startswith("Space ")
        assert all({"name", "email", "user_type"} <= set(m) for m in info["members"])
        messages = json.loads((group / "messages.json").read_text(encoding="utf-8"))["messages"]
        total += len(messages)
        code = group.name.split(" ", 1)[1]
        roots = set()
        for message in messages:
            datetime.strptime(message["created_date"].replace(" UTC", ""), "%A, %B %d, %Y at %I:%M:%S %p")
            prefix, topic, unique = message["message_id"].split("/")
            assert prefix == code and topic == message["topic_id"]
            if unique == topic:
                roots.add(topic)
            else:
                assert topic in roots, "a reply must follow its root post"
                threaded = True
            reacted |= bool(message["reactions"])
            if message.get("message_state") == "DELETED":
                deleted = True
                assert message["text"] == ""
    assert total >= 100
    assert threaded and reacted and deleted
    users = list((root / "Users").glob("User */user_info.json"))
    assert len(users) == 1
    user = json.loads(users[0].read_text(encoding="utf-8"))
    assert {m["group_id"] for m in user["membership_info"]} == {g.name for g in groups}


@pytest.mark.parametrize("world_id", WORLDS)
def test_every_message_is_the_users_own_mail_with_gmail_headers(sample_dir, worlds, world_id):
    user = {w["world_id"]: w for w in json.loads((sample_dir / "world_descriptions.json").read_text())}[
        world_id
    ]
    messages = _messages(worlds[world_id])
    threads = {m["Message-ID"]: m["X-GM-THRID"] for m in messages}
    for message in messages:
        people = {
            address.lower()
            for _name, address in getaddresses([message["From"], message["To"], message["Cc"] or ""])
        }
        assert user["user_email"] in people, message["Subject"]
        mine = user["user_email"] in message["From"]
        assert message["X-Gmail-Labels"] == ("Sent" if mine else "Inbox,Opened")
        if message["In-Reply-To"]:
            assert message["X-GM-THRID"] == threads[message["In-Reply-To"]]
    assert len(set(threads.values())) < len(threads)
