"""Mails, calendar events and chat messages added, removed and changed, field by field
(grader.diff.record_changes), from real snapshots: what the viewer's world diff shows."""

from grader.diff import FieldChange, diff_snapshots, record_changes
from grader.snapshot import Snapshot
from tests.grader import factories as f

MAIL = ".apps_data/mail/Sent.mbox"
CALENDAR = ".apps_data/calendar/me@acme.com.ics"
CHAT = ".apps_data/chat/Google Chat/Groups/Space AAA/messages.json"
INFO = ".apps_data/chat/Google Chat/Groups/Space AAA/group_info.json"


def _mail(**fields):
    return {"from": "me@acme.com", "to": "ana@acme.com", "subject": "Q3", "body": "Draft attached.", **fields}


def _event(**fields):
    return {"uid": "e1", "summary": "Board", "start": "20250303T100000Z", "end": "20250303T110000Z", **fields}


def _records(tmp_path):
    kept = _mail(id="<kept@a>", subject="Kept")
    before = {
        MAIL: f.mbox(
            [kept, _mail(id="<edit@a>", cc="bo@acme.com"), _mail(id="<gone@a>", subject="Old news")]
        ),
        CALENDAR: f.ics(
            [_event(location="Room 1", attendees=["ana@acme.com"]), _event(uid="e2", summary="Standup")]
        ),
        CHAT: f.chat_messages(
            [f.chat_message("Space AAA", "t1", "t1", "hello"), f.chat_message("Space AAA", "t2", "t2", "bye")]
        ),
        INFO: '{"name": "Deal team"}',
    }
    after = {
        MAIL: f.mbox(
            [
                kept,
                _mail(id="<edit@a>", body="Final attached.", attachment=("q3.xlsx", b"x")),
                _mail(id="<new@a>", to="bo@acme.com", subject="Hello", body="Hi Bo"),
            ]
        ),
        CALENDAR: f.ics(
            [
                _event(
                    location="Room 2",
                    start="20250303T140000Z",
                    end="20250303T150000Z",
                    attendees=["ana@acme.com"],
                ),
                _event(uid="e3", summary="Offsite", location="Lisbon", attendees=["bo@acme.com"]),
            ]
        ),
        CHAT: f.chat_messages(
            [
                f.chat_message("Space AAA", "t1", "t1", "hello, team"),
                f.chat_message("Space AAA", "t3", "t3", "new plan", author="bo@acme.com"),
            ]
        ),
        INFO: '{"name": "Deal team"}',
    }
    diff = diff_snapshots(
        Snapshot(f.write_snapshot(tmp_path / "before.tar.gz", before)),
        Snapshot(f.write_snapshot(tmp_path / "after.tar.gz", after)),
    )
    return {(r.kind, r.action, r.title): r for r in record_changes(diff.changes)}


def test_mails_events_and_chat_are_listed_field_by_field(tmp_path):
    records = _records(tmp_path)
    assert set(records) == {
        ("mail", "sent", "Hello"),
        ("mail", "deleted", "Old news"),
        ("mail", "edited", "Q3"),
        ("event", "updated", "Board"),
        ("event", "created", "Offsite"),
        ("event", "deleted", "Standup"),
        ("chat", "edited", "Deal team · ana@example.com"),
        ("chat", "posted", "Deal team · bo@acme.com"),
        ("chat", "deleted", "Deal team · ana@example.com"),
    }
    # An edit lists only what changed, before and after; the unchanged fields are not noise.
    edited = records[("mail", "edited", "Q3")]
    assert (edited.change, edited.id) == ("changed", "mail:<edit@a>:edited")
    assert {c.field: (c.before, c.after) for c in edited.fields} == {
        "cc": (["bo@acme.com"], []),
        "body": ("Draft attached.", "Final attached."),
        "attachments": ([], ["q3.xlsx"]),
    }
    sent = records[("mail", "sent", "Hello")]
    assert sent.change == "added" and sent.id == "mail:<new@a>"
    assert [c.field for c in sent.fields] == ["from", "to", "subject", "body"]
    assert all(c.before is None for c in sent.fields)
    gone = records[("mail", "deleted", "Old news")]
    assert gone.change == "removed" and FieldChange("subject", "Old news", None) in gone.fields

    moved = records[("event", "updated", "Board")]
    assert [(c.field, c.before, c.after) for c in moved.fields] == [
        ("start", "2025-03-03T10:00:00+00:00", "2025-03-03T14:00:00+00:00"),
        ("end", "2025-03-03T11:00:00+00:00", "2025-03-03T15:00:00+00:00"),
        ("location", "Room 1", "Room 2"),
    ]
    created = records[("event", "created", "Offsite")]
    assert {c.field: c.after for c in created.fields} == {
        "title": "Offsite",
        "start": "2025-03-03T10:00:00+00:00",
        "end": "2025-03-03T11:00:00+00:00",
        "attendees": ["bo@acme.com"],
        "location": "Lisbon",
    }
    assert records[("event", "deleted", "Standup")].change == "removed"

    chat_edit = records[("chat", "edited", "Deal team · ana@example.com")]
    assert [(c.field, c.before, c.after) for c in chat_edit.fields] == [("text", "hello", "hello, team")]
    posted = records[("chat", "posted", "Deal team · bo@acme.com")]
    assert {c.field: c.after for c in posted.fields} == {
        "channel": "Deal team",
        "author": "bo@acme.com",
        "text": "new plan",
    }
