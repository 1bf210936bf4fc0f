"""A calendar's content is parsed once in a process: every trial of a world diffs the same
seed calendar; each diff gets fields of its own, and other bytes are parsed on their own."""

from __future__ import annotations

import uuid

from atoll.formats import ics as ics_format
from grader import appdata
from tests.grader.factories import ics


def _calendar(summary: str, marker: str) -> bytes:
    return ics(
        [
            {
                "uid": f"kickoff-{marker}",
                "summary": summary,
                "start": "20250310T090000Z",
                "end": "20250310T100000Z",
                "attendees": ["ana@example.com", "ben@example.com"],
            },
        ]
    )


def test_each_calendar_content_is_parsed_once_and_every_diff_is_its_own(monkeypatch):
    marker = uuid.uuid4().hex  # contents no other test parsed in this process
    read_events = ics_format.read_events
    parsed = []
    monkeypatch.setattr(ics_format, "read_events", lambda data: parsed.append(data) or read_events(data))
    seed = _calendar("Kickoff", marker)
    moved = _calendar("Kickoff (moved)", marker)
    path = ".apps_data/calendar/work.ics"

    changes, errors = appdata.diff_calendar({path: seed}, {path: moved})
    assert errors == [] and [(c.change, c.changed_fields) for c in changes] == [
        ("updated", {"summary": {"before": "Kickoff", "after": "Kickoff (moved)"}})
    ]
    assert len(parsed) == 2

    # the same contents in another trial's world: parsed no more, and the same answer
    again, _ = appdata.diff_calendar({path: seed}, {path: moved})
    assert [c.model_dump() for c in again] == [c.model_dump() for c in changes] and len(parsed) == 2
    # a caller changing what it got changes nothing for the next one
    first = appdata._events(path, seed, [])
    first[f"kickoff-{marker}"]["attendee"].append("eve@example.com")
    assert appdata._events(path, seed, [])[f"kickoff-{marker}"]["attendee"] == [
        "ana@example.com",
        "ben@example.com",
    ]
    assert appdata.diff_calendar({path: seed}, {path: seed}) == ([], []) and len(parsed) == 2

    # other bytes are read on their own
    other = _calendar("Review", marker)
    assert [c.change for c in appdata.diff_calendar({path: seed}, {path: other})[0]] == ["updated"]
    assert len(parsed) == 3
