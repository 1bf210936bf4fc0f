"""Calendar server tools in both modes against small handcrafted worlds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from icalendar import Calendar

from mcp_servers import get_definition
from tests.mcp_servers.helpers import McpSession, World, make_world, open_session, text_of

USER = {"user_email": "me@example.com", "user_name": "Mia Example"}
MODES = ["individual", "consolidated"]

TEAM_ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//handmade//EN\r
X-WR-CALNAME:Team\r
BEGIN:VTIMEZONE\r
TZID:America/New_York\r
BEGIN:STANDARD\r
DTSTART:19701101T020000\r
RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=1SU\r
TZOFFSETFROM:-0400\r
TZOFFSETTO:-0500\r
TZNAME:EST\r
END:STANDARD\r
BEGIN:DAYLIGHT\r
DTSTART:19700308T020000\r
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=2SU\r
TZOFFSETFROM:-0500\r
TZOFFSETTO:-0400\r
TZNAME:EDT\r
END:DAYLIGHT\r
END:VTIMEZONE\r
BEGIN:VEVENT\r
UID:standup@team\r
DTSTAMP:20250101T000000Z\r
DTSTART;TZID=America/New_York:20250303T100000\r
DTEND;TZID=America/New_York:20250303T101500\r
RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20250331T235959Z\r
EXDATE;TZID=America/New_York:20250317T100000\r
SUMMARY:Team standup\r
LOCATION:Room 4\r
ATTENDEE;CN=Bob Builder;PARTSTAT=ACCEPTED:mailto:bob@example.com\r
X-VENDOR-TRACKING;ID=42:keep-this-value\r
BEGIN:VALARM\r
ACTION:DISPLAY\r
DESCRIPTION:Standup soon\r
TRIGGER:-PT10M\r
END:VALARM\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:offsite@team\r
DTSTAMP:20250101T000000Z\r
DTSTART;VALUE=DATE:20250305\r
DTEND;VALUE=DATE:20250307\r
SUMMARY:Offsite\r
DESCRIPTION:Two days in the mountains\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:review@team\r
DTSTAMP:20250101T000000Z\r
DTSTART:20250304T170000Z\r
DTEND:20250304T180000Z\r
SUMMARY:Budget review\r
END:VEVENT\r
END:VCALENDAR\r
"""

PERSONAL_ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//handmade//EN\r
BEGIN:VEVENT\r
UID:dentist@me\r
DTSTAMP:20250101T000000Z\r
DTSTART:20250228T090000\r
DTEND:20250228T100000\r
SUMMARY:Dentist\r
END:VEVENT\r
END:VCALENDAR\r
"""


def calendar_world(tmp_path) -> World:
    world = make_world(tmp_path)
    world.app_file("calendar/team.ics", TEAM_ICS.encode())
    world.app_file("calendar/personal/mine.ics", PERSONAL_ICS.encode())
    return world


class Calendar_:
    """Calls calendar tools by their individual names in either mode."""

    def __init__(self, session: McpSession, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.definition = get_definition("calendar")

    def _args(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.mode == "individual":
            return tool, arguments
        return "calendar", {"action": self.definition.find(tool).action, **arguments}

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.ok(*self._args(tool, arguments))

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.error(*self._args(tool, arguments))


@pytest.fixture(params=MODES)
def cal(request, tmp_path) -> Iterator[Calendar_]:
    world = calendar_world(tmp_path)
    with open_session("calendar", world, mode=request.param, options=USER) as session:
        client = Calendar_(session, request.param)
        client.world = world
        yield client


def user_file(world: World):
    return world.apps_root / "calendar" / "me@example.com.ics"


# ---- list ------------------------------------------------------------------------------


def test_list_events_sorted_by_start_over_all_files(cal):
    result = cal.ok("list_events")
    assert [e["id"] for e in result["events"]] == [
        "dentist@me",
        "standup@team",
        "review@team",
        "offsite@team",
    ]
    assert result["total"] == 4 and result["has_more"] is False
    assert {e["calendarFile"] for e in result["events"]} == {"team.ics", "personal/mine.ics"}


def test_list_events_paginates(cal):
    first = cal.ok("list_events", limit=3)
    second = cal.ok("list_events", limit=3, offset=3)
    assert len(first["events"]) == 3 and first["has_more"] is True
    assert [e["id"] for e in second["events"]] == ["offsite@team"] and second["has_more"] is False
    assert cal.error("list_events", limit=101)["code"] == "invalid_argument"


def test_range_listing_expands_recurrence_and_mixes_naive_and_aware_bounds(cal):
    result = cal.ok("list_events", time_min="2025-03-03", time_max="2025-03-25T00:00:00Z")
    ids = [e["id"] for e in result["events"]]
    # EXDATE 17 March is skipped; the weekly 10:00 stays 10:00 New York across the 9 March DST change.
    assert ids == [
        "standup@team_20250303T150000Z",
        "review@team",
        "offsite@team",
        "standup@team_20250310T140000Z",
        "standup@team_20250324T140000Z",
    ]
    occurrence = result["events"][3]
    assert occurrence["start"] == {"dateTime": "2025-03-10T10:00:00-04:00", "timeZone": "America/New_York"}
    assert occurrence["end"]["dateTime"] == "2025-03-10T10:15:00-04:00"
    assert occurrence["recurringEventId"] == "standup@team"


def test_range_listing_includes_events_overlapping_the_start(cal):
    result = cal.ok("list_events", time_min="2025-03-06T12:00:00+01:00", time_max="2025-03-06T13:00:00+01:00")
    assert [e["id"] for e in result["events"]] == ["offsite@team"]


def test_range_listing_rejects_bad_bounds(cal):
    assert cal.error("list_events", time_min="next tuesday")["code"] == "invalid_argument"
    assert (
        cal.error("list_events", time_min="2025-03-05", time_max="2025-03-01")["code"] == "invalid_argument"
    )


def test_list_events_query(cal):
    result = cal.ok("list_events", query="BOB@example")
    assert [e["id"] for e in result["events"]] == ["standup@team"]


# ---- read ------------------------------------------------------------------------------


def test_read_event_gives_recurrence_reminders_and_time_zone(cal):
    event = cal.ok("read_event", event_id="standup@team")
    assert event["recurrence"] == [
        "RRULE:FREQ=WEEKLY;UNTIL=20250331T235959Z;BYDAY=MO",
        "EXDATE;TZID=America/New_York:20250317T100000",
    ]
    assert event["reminders"] == {"useDefault": False, "overrides": [{"method": "popup", "minutes": 10}]}
    assert event["start"]["timeZone"] == "America/New_York"
    assert event["attendees"] == [
        {"email": "bob@example.com", "displayName": "Bob Builder", "responseStatus": "accepted"}
    ]
    assert event["location"] == "Room 4"


def test_read_event_occurrence_and_missing(cal):
    occurrence = cal.ok("read_event", event_id="standup@team_20250324T140000Z")
    assert occurrence["start"]["dateTime"] == "2025-03-24T10:00:00-04:00"
    assert cal.error("read_event", event_id="nope")["code"] == "not_found"
    assert cal.error("read_event", event_id="standup@team_20250317T140000Z")["code"] == "not_found"


# ---- create ----------------------------------------------------------------------------


def test_create_event_goes_to_user_file_and_standard_tools_read_it(cal):
    created = cal.ok(
        "create_event",
        summary="Client call",
        start={"dateTime": "2025-03-04T10:00:00", "timeZone": "Europe/Paris"},
        end={"dateTime": "2025-03-04T11:00:00", "timeZone": "Europe/Paris"},
        description="Agenda: pricing",
        location="Zoom",
        attendees=[{"email": "ann@client.com", "displayName": "Ann"}],
        colorId="5",
        reminders={
            "useDefault": False,
            "overrides": [{"method": "popup", "minutes": 30}, {"method": "email", "minutes": 1440}],
        },
        recurrence=["RRULE:FREQ=WEEKLY;COUNT=4"],
    )
    assert created["calendarFile"] == "me@example.com.ics"
    assert created["start"] == {"dateTime": "2025-03-04T10:00:00+01:00", "timeZone": "Europe/Paris"}
    assert created["organizer"] == {"email": "me@example.com", "displayName": "Mia Example"}
    again = cal.ok("read_event", event_id=created["id"])
    assert again["reminders"]["overrides"] == [
        {"method": "popup", "minutes": 30},
        {"method": "email", "minutes": 1440},
    ]
    assert again["recurrence"] == ["RRULE:FREQ=WEEKLY;COUNT=4"] and again["colorId"] == "5"
    parsed = Calendar.from_ical(user_file(cal.world).read_bytes())
    (event,) = parsed.walk("VEVENT")
    assert str(event["SUMMARY"]) == "Client call"
    assert event["DTSTART"].params["TZID"] == "Europe/Paris"
    assert [str(z["TZID"]) for z in parsed.walk("VTIMEZONE")] == ["Europe/Paris"]
    assert len(event.walk("VALARM")) == 2


def test_second_create_appends_to_the_same_file_without_touching_existing_bytes(cal):
    cal.ok("create_event", summary="One", start="2025-04-01T09:00:00Z", end="2025-04-01T10:00:00Z")
    before = user_file(cal.world).read_bytes()
    cal.ok("create_event", summary="Two", start={"date": "2025-04-02"}, end={"date": "2025-04-03"})
    after = user_file(cal.world).read_bytes()
    assert after.startswith(before[: before.rindex(b"END:VCALENDAR")])
    summaries = [str(e["SUMMARY"]) for e in Calendar.from_ical(after).walk("VEVENT")]
    assert summaries == ["One", "Two"]
    (two,) = [e for e in cal.ok("list_events")["events"] if e["summary"] == "Two"]
    assert two["start"] == {"date": "2025-04-02"} and two["end"] == {"date": "2025-04-03"}


@pytest.mark.parametrize(
    ("start", "end", "fragment"),
    [
        ("2025-03-04T10:00:00Z", "2025-03-04T09:00:00Z", "must be after start"),
        ("2025-03-04T10:00:00Z", "2025-03-04T10:00:00Z", "must be after start"),
        ({"date": "2025-03-04"}, "2025-03-05T10:00:00Z", "both be"),
        (
            {"dateTime": "2025-03-04T10:00:00", "timeZone": "Mars/Olympus"},
            "2025-03-05T10:00:00Z",
            "unknown time zone",
        ),
        ({"timeZone": "UTC"}, "2025-03-05T10:00:00Z", "dateTime"),
    ],
)
def test_create_event_refuses_bad_times(cal, start, end, fragment):
    error = cal.error("create_event", summary="x", start=start, end=end)
    assert error["code"] == "invalid_argument" and fragment in error["message"]
    assert not user_file(cal.world).exists()


def test_create_event_refuses_bad_recurrence(cal):
    error = cal.error(
        "create_event",
        summary="x",
        start="2025-03-04T10:00:00Z",
        end="2025-03-04T11:00:00Z",
        recurrence=["FREQ=DAILY"],
    )
    assert error["code"] == "invalid_argument" and "recurrence[0]" in error["message"]


# ---- update ----------------------------------------------------------------------------


def test_update_keeps_unknown_properties_recurrence_alarms_and_other_bytes(cal):
    team = cal.world.apps_root / "calendar" / "team.ics"
    updated = cal.ok("update_event", event_id="standup@team", summary="Daily standup")
    assert updated["summary"] == "Daily standup"
    assert updated["recurrence"][1] == "EXDATE;TZID=America/New_York:20250317T100000"
    assert updated["reminders"]["overrides"] == [{"method": "popup", "minutes": 10}]
    assert updated["calendarFile"] == "team.ics"
    text = team.read_text()
    assert "X-VENDOR-TRACKING;ID=42:keep-this-value" in text
    # The other events and the time zone are untouched, byte for byte.
    tail = TEAM_ICS[TEAM_ICS.index("BEGIN:VEVENT\r\nUID:offsite@team") :]
    assert team.read_bytes().endswith(tail.encode())
    assert team.read_bytes().startswith(TEAM_ICS[: TEAM_ICS.index("BEGIN:VEVENT")].encode())
    assert not user_file(cal.world).exists()
    event = next(
        e for e in Calendar.from_ical(team.read_bytes()).walk("VEVENT") if str(e["UID"]) == "standup@team"
    )
    assert int(event["SEQUENCE"]) == 1


def test_update_moving_start_keeps_duration_and_time_zone(cal):
    updated = cal.ok(
        "update_event",
        event_id="review@team",
        start={"dateTime": "2025-03-05T09:00:00", "timeZone": "Asia/Tokyo"},
    )
    assert updated["start"] == {"dateTime": "2025-03-05T09:00:00+09:00", "timeZone": "Asia/Tokyo"}
    assert updated["end"]["dateTime"] == "2025-03-05T10:00:00+09:00"


def test_update_reminders_recurrence_attendees_and_clearing(cal):
    updated = cal.ok(
        "update_event",
        event_id="standup@team",
        reminders={"useDefault": True},
        recurrence=[],
        attendees=[{"email": "bob@example.com", "responseStatus": "declined"}, {"email": "new@example.com"}],
        location="",
    )
    assert updated["reminders"] == {"useDefault": True, "overrides": []}
    assert "recurrence" not in updated and "location" not in updated
    assert updated["attendees"][0] == {
        "email": "bob@example.com",
        "displayName": "Bob Builder",
        "responseStatus": "declined",
    }
    assert updated["attendees"][1]["email"] == "new@example.com"


def test_update_checks_order_and_existence(cal):
    error = cal.error("update_event", event_id="review@team", end="2025-03-04T16:00:00Z")
    assert error["code"] == "invalid_argument" and "after start" in error["message"]
    assert cal.error("update_event", event_id="missing", summary="x")["code"] == "not_found"
    assert cal.error("update_event", event_id="review@team")["code"] == "invalid_argument"
    occurrence = cal.error("update_event", event_id="standup@team_20250310T140000Z", summary="x")
    assert occurrence["code"] == "invalid_argument" and "occurrence" in occurrence["message"]


def test_delete_one_occurrence_adds_an_exdate_to_the_series(cal):
    result = cal.ok("delete_event", event_id="standup@team_20250310T140000Z")
    assert result["deleted"] is True and result["recurringEventId"] == "standup@team"
    listed = cal.ok("list_events", time_min="2025-03-01", time_max="2025-04-01", query="standup")["events"]
    assert [e["start"]["dateTime"][:10] for e in listed] == ["2025-03-03", "2025-03-24", "2025-03-31"]
    assert (
        "EXDATE;TZID=America/New_York:20250310T100000"
        in cal.ok("read_event", event_id="standup@team")["recurrence"]
    )
    assert cal.error("delete_event", event_id="standup@team_20250310T140000Z")["code"] == "not_found"
    assert cal.error("delete_event", event_id="standup@team_20250311T140000Z")["code"] == "not_found"


# ---- delete ----------------------------------------------------------------------------


def test_delete_event_removes_only_that_event(cal):
    team = cal.world.apps_root / "calendar" / "team.ics"
    assert cal.ok("delete_event", event_id="offsite@team")["deleted"] is True
    text = team.read_text()
    assert "offsite@team" not in text and "standup@team" in text and "review@team" in text
    assert cal.error("read_event", event_id="offsite@team")["code"] == "not_found"
    assert cal.error("delete_event", event_id="offsite@team")["code"] == "not_found"
    assert [e["id"] for e in cal.ok("list_events")["events"]] == ["dentist@me", "standup@team", "review@team"]


# ---- modes -----------------------------------------------------------------------------


def test_tool_names_in_both_modes(tmp_path):
    world = calendar_world(tmp_path)
    with open_session("calendar", world, options=USER) as session:
        assert session.tool_names() == [
            "create_event",
            "delete_event",
            "list_events",
            "read_event",
            "update_event",
        ]
    with open_session("calendar", world, mode="consolidated", options=USER) as session:
        assert session.tool_names() == ["calendar", "calendar_schema"]
        help_result = session.ok("calendar", {"action": "help"})
        assert {a["action"] for a in help_result["actions"]} == {"create", "read", "update", "delete", "list"}
        schema = session.ok("calendar_schema", {"model": "create"})
        assert {"summary", "start", "end"} <= set(schema["input_schema"]["required"])
        assert "calendar" in text_of(session.call("calendar", {"action": "bogus"}))


def test_update_switching_between_all_day_and_timed(cal):
    all_day = cal.ok("update_event", event_id="review@team", start={"date": "2025-03-20"})
    assert all_day["start"] == {"date": "2025-03-20"} and all_day["end"] == {"date": "2025-03-21"}
    timed = cal.ok("update_event", event_id="offsite@team", start="2025-03-05T09:00:00Z")
    assert timed["end"]["dateTime"] == "2025-03-05T10:00:00+00:00"


def test_update_ignores_empty_objects_sent_for_unchanged_fields(cal):
    updated = cal.ok("update_event", event_id="standup@team", summary="Renamed", start={}, reminders={})
    assert updated["reminders"]["overrides"] == [{"method": "popup", "minutes": 10}]
    assert updated["start"]["dateTime"] == "2025-03-03T10:00:00-05:00"


def test_update_to_a_new_time_zone_adds_its_vtimezone_once(cal):
    team = cal.world.apps_root / "calendar" / "team.ics"
    cal.ok(
        "update_event",
        event_id="review@team",
        start={"dateTime": "2025-03-05T09:00:00", "timeZone": "Asia/Tokyo"},
    )
    cal.ok("update_event", event_id="review@team", summary="again")
    zones = [str(z["TZID"]) for z in Calendar.from_ical(team.read_bytes()).walk("VTIMEZONE")]
    assert sorted(zones) == ["America/New_York", "Asia/Tokyo"]
    assert team.read_text().rstrip().endswith("END:VCALENDAR")


def test_create_with_exdate_in_another_zone_adds_that_zone_too(cal):
    cal.ok(
        "create_event",
        summary="Series",
        start={"dateTime": "2025-03-04T10:00:00", "timeZone": "Europe/Paris"},
        end={"dateTime": "2025-03-04T11:00:00", "timeZone": "Europe/Paris"},
        recurrence=["RRULE:FREQ=DAILY;COUNT=5", "EXDATE;TZID=Europe/London:20250305T090000"],
    )
    cal.ok("create_event", summary="Second", start="2025-03-09T10:00:00Z", end="2025-03-09T11:00:00Z")
    zones = [str(z["TZID"]) for z in Calendar.from_ical(user_file(cal.world).read_bytes()).walk("VTIMEZONE")]
    assert sorted(zones) == ["Europe/London", "Europe/Paris"]
    listed = cal.ok("list_events", time_min="2025-03-04", time_max="2025-03-10", query="series")["events"]
    assert [e["start"]["dateTime"][:10] for e in listed] == [
        "2025-03-04",
        "2025-03-06",
        "2025-03-07",
        "2025-03-08",
    ]


def test_times_given_as_json_text_are_accepted(cal):
    created = cal.ok(
        "create_event",
        summary="Text times",
        start='{"dateTime": "2025-03-04T10:00:00", "timeZone": "America/New_York"}',
        end='{"dateTime": "2025-03-04T11:00:00", "timeZone": "America/New_York"}',
    )
    assert created["start"]["timeZone"] == "America/New_York"
    assert (
        cal.error("create_event", summary="x", start="{broken", end="2025-03-04T11:00:00Z")["code"]
        == "invalid_argument"
    )


MIXED_ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:mixed@team\r\n"
    "SUMMARY:Day into a morning\r\nDTSTART;VALUE=DATE:20250304\r\nDTEND:20250305T100000Z\r\n"
    "END:VEVENT\r\nEND:VCALENDAR\r\n"
)


@pytest.mark.parametrize("mode", MODES)
def test_moving_the_start_of_an_event_that_mixes_a_date_and_a_date_time(tmp_path, mode):
    """A file's event may start on a date and end at a date-time; they do not subtract, so
    moving its start gives the new start's default length instead of an internal error."""
    world = make_world(tmp_path)
    world.app_file("calendar/mixed.ics", MIXED_ICS.encode())
    with open_session("calendar", world, mode=mode, options=USER) as session:
        cal = Calendar_(session, mode)
        updated = cal.ok("update_event", event_id="mixed@team", start={"date": "2025-03-10"})
    assert updated["start"] == {"date": "2025-03-10"}
    assert updated["end"] == {"date": "2025-03-11"}
