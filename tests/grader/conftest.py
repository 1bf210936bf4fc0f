"""Shared worlds for grader tests: a before/after pair touching files, mail, calendar and chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.grader import factories as f

BEFORE = {
    "filesystem/Reports/model.xlsx": f.xlsx(
        {"Model": [["Revenue", 100], ["Costs", 60]], "Notes": [["draft"]]}
    ),
    "filesystem/Reports/memo.docx": f.docx(["Revenue grew.", "Costs fell."]),
    "filesystem/Data/raw.csv": "region,sales\nnorth,10\nsouth,20\n",
    "filesystem/old.txt": "obsolete",
    ".apps_data/mail/All mail Including Spam and Trash.mbox": f.mbox(
        [
            {
                "from": "boss@acme.com",
                "to": "me@acme.com",
                "subject": "Need Q3",
                "body": "Please send",
                "id": "<1@acme>",
            }
        ]
    ),
    ".apps_data/calendar/me@acme.com.ics": f.ics(
        [{"uid": "standup", "summary": "Standup", "start": "20250303T100000Z", "end": "20250303T103000Z"}]
    ),
    ".apps_data/chat/Groups/Space AAA/messages.json": f.chat_messages(
        [f.chat_message("Space AAA", "t1", "t1", "Who has the Q3 numbers?")]
    ),
    ".apps_data/chat/Groups/Space AAA/group_info.json": '{"name": "Finance", "members": []}',
}

AFTER = {
    **BEFORE,
    "filesystem/Reports/model.xlsx": f.xlsx(
        {"Model": [["Revenue", 100], ["Costs", 60], ["Profit", 40]], "Notes": [["draft"]]}
    ),
    "filesystem/Reports/summary.xlsx": f.xlsx(
        {"Summary": [["Metric", "Value"], ["Profit", 40], ["Margin", 0.4]]}
    ),
    "filesystem/Reports/deck.pptx": f.pptx(
        [("Q3 results", ["Profit 40", "Margin 40%"], "Mention the margin")]
    ),
    "filesystem/Reports/summary.pdf": f.pdf(["Q3 summary: profit 40", "Appendix"]),
    ".apps_data/mail/All mail Including Spam and Trash.mbox": f.mbox(
        [
            {
                "from": "boss@acme.com",
                "to": "me@acme.com",
                "subject": "Need Q3",
                "body": "Please send",
                "id": "<1@acme>",
            },
            {
                "from": "me@acme.com",
                "to": "Boss <boss@acme.com>",
                "cc": "cfo@acme.com",
                "subject": "Q3 summary",
                "body": "Profit was 40, margin 40%.",
                "id": "<2@acme>",
                "attachment": ("summary.pdf", b"%PDF-1.4"),
            },
        ]
    ),
    ".apps_data/calendar/me@acme.com.ics": f.ics(
        [
            {"uid": "standup", "summary": "Standup", "start": "20250303T100000Z", "end": "20250303T103000Z"},
            {
                "uid": "review",
                "summary": "Q3 review",
                "start": "20250304T150000Z",
                "end": "20250304T160000Z",
                "attendees": ["boss@acme.com", "cfo@acme.com"],
            },
        ]
    ),
    ".apps_data/chat/Groups/Space AAA/messages.json": f.chat_messages(
        [
            f.chat_message("Space AAA", "t1", "t1", "Who has the Q3 numbers?"),
            f.chat_message("Space AAA", "t1", "r1", "Posted the Q3 summary: profit 40", author="me@acme.com"),
        ]
    ),
}
del AFTER["filesystem/old.txt"]


@pytest.fixture
def world_pair(tmp_path: Path) -> tuple[Path, Path]:
    """(before, after) snapshot tar.gz paths of the shared world."""
    return f.write_snapshot(tmp_path / "before.tar.gz", BEFORE), f.write_snapshot(
        tmp_path / "after.tar.gz", AFTER
    )
