"""Calendar data handling: broken files, caching, concurrent writes, recurrence edge cases."""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC

import pytest
from icalendar import Calendar

from atoll.formats.ics import IcsSyntaxError, split_blocks
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers.calendar.models import EventTime
from mcp_servers.calendar.service import CalendarService
from tests.mcp_servers.helpers import make_world, open_session
from tests.mcp_servers.test_calendar_tools import PERSONAL_ICS, TEAM_ICS, USER, calendar_world


def service(world, **options) -> CalendarService:
    return CalendarService(ServerContext.create(world.fs_root, world.apps_root, {**USER, **options}))


def vevent(uid: str, start: str, end: str, extra: str = "") -> str:
    return f"BEGIN:VEVENT\nUID:{uid}\nDTSTAMP:20250101T000000Z\nDTSTART:{start}\nDTEND:{end}\nSUMMARY:{uid}\n{extra}END:VEVENT\n"


def ics(*events: str) -> str:
    return "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//EN\n" + "".join(events) + "END:VCALENDAR\n"


def create(
    calendar: CalendarService,
    summary: str,
    start: str = "2025-05-01T09:00:00Z",
    end: str = "2025-05-01T10:00:00Z",
):
    return calendar.create_event(
        summary=summary,
        start=EventTime(dateTime=start),
        end=EventTime(dateTime=end),
        description=None,
        location=None,
        attendees=None,
        color_id=None,
        reminders=None,
        recurrence=None,
    )


# ---- blocks ----------------------------------------------------------------------------


def test_split_blocks_finds_top_level_components_and_insert_point():
    layout = split_blocks(TEAM_ICS)
    assert [b.name for b in layout.blocks] == ["VTIMEZONE", "VEVENT", "VEVENT", "VEVENT"]
    assert TEAM_ICS[layout.insert_at :].startswith("END:VCALENDAR")
    assert layout.newline == "\r\n"
    assert layout.blocks[1].text(TEAM_ICS).startswith("BEGIN:VEVENT\r\nUID:standup@team")
    assert layout.blocks[1].text(TEAM_ICS).endswith("END:VEVENT\r\n")


@pytest.mark.parametrize(
    "text",
    ["", "hello world", "BEGIN:VCALENDAR\nBEGIN:VEVENT\nEND:VCALENDAR\n", "BEGIN:VEVENT\nEND:VEVENT\n"],
)
def test_split_blocks_refuses_broken_streams(text):
    with pytest.raises(IcsSyntaxError):
        split_blocks(text)


# ---- bad data --------------------------------------------------------------------------


def test_broken_file_and_broken_event_are_reported_once_and_the_rest_served(tmp_path, caplog):
    world = calendar_world(tmp_path)
    world.app_file("calendar/broken.ics", "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:x\n")  # never closed
    world.app_file(
        "calendar/partly.ics",
        ics(
            vevent("good@p", "20250310T090000Z", "20250310T100000Z"),
            "BEGIN:VEVENT\nUID:bad@p\nDTSTART:notadate\nEND:VEVENT\n",
        ),
    )
    caplog.set_level(logging.WARNING, logger="mcp_servers.calendar")
    with open_session("calendar", world, options=USER) as session:
        for _ in range(3):
            result = session.ok("list_events", {"limit": 100})
    assert "good@p" in [e["id"] for e in result["events"]] and len(result["events"]) == 5
    problems = result["problems"]
    assert any("broken.ics" in p and "never closed" in p for p in problems)
    assert any("partly.ics" in p and "line 11" in p and "DTSTART 'notadate'" in p for p in problems)
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_servers.calendar"]
    assert len(warnings) == 2  # once each, not once per call


def test_writes_refuse_to_touch_an_unreadable_user_file(tmp_path):
    world = make_world(tmp_path)
    path = world.app_file("calendar/me@example.com.ics", "garbage")
    with pytest.raises(ToolError) as error:
        create(service(world), "x")
    assert error.value.code == "bad_data"
    assert path.read_text() == "garbage"


def test_latin1_and_lf_files_are_read_and_spliced_in_their_own_line_breaks(tmp_path):
    world = make_world(tmp_path)
    path = world.app_file(
        "calendar/old.ics",
        ics(vevent("caf@x", "20250310T090000Z", "20250310T100000Z"))
        .replace("SUMMARY:caf@x", "SUMMARY:Caf\xe9")
        .encode("latin-1"),
    )
    calendar = service(world)
    assert calendar.read_event("caf@x")["summary"] == "Café"
    calendar.update_event("caf@x", {"location": "Paris"})
    data = path.read_bytes()
    assert b"\r\n" not in data and b"LOCATION:Paris" in data


# ---- cache -----------------------------------------------------------------------------


def test_warm_reads_do_not_reparse_and_external_changes_are_seen(tmp_path):
    world = calendar_world(tmp_path)
    calendar = service(world)
    calendar.list_events(limit=50, offset=0)
    misses = calendar.index.files.misses
    for _ in range(5):
        calendar.list_events(limit=50, offset=0)
        calendar.read_event("review@team")
    assert calendar.index.files.misses == misses
    # A populate replaces a file behind our back: the next call sees it.
    personal = world.apps_root / "calendar" / "personal" / "mine.ics"
    personal.write_text(PERSONAL_ICS.replace("Dentist", "Orthodontist"))
    assert calendar.read_event("dentist@me")["summary"] == "Orthodontist"
    os.remove(personal)
    assert [e["id"] for e in calendar.list_events(limit=50, offset=0)["events"]] == [
        "standup@team",
        "review@team",
        "offsite@team",
    ]


def test_own_writes_update_the_cache_without_reparsing(tmp_path):
    world = calendar_world(tmp_path)
    calendar = service(world)
    calendar.list_events(limit=50, offset=0)
    misses = calendar.index.files.misses
    created = create(calendar, "Planning")
    calendar.update_event("review@team", {"summary": "Budget review (moved)"})
    calendar.delete_event("offsite@team")
    listed = {e["id"]: e["summary"] for e in calendar.list_events(limit=50, offset=0)["events"]}
    assert listed[created["id"]] == "Planning" and listed["review@team"] == "Budget review (moved)"
    assert "offsite@team" not in listed
    # Only the first create parsed (the user file did not exist before).
    assert calendar.index.files.misses - misses <= 1


# ---- concurrency -----------------------------------------------------------------------


def test_concurrent_creates_and_updates_lose_nothing(tmp_path):
    world = calendar_world(tmp_path)
    servers = [service(world) for _ in range(3)]  # separate caches, like separate processes
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            create(servers[index % 3], f"Event {index}")
            servers[index % 3].update_event("review@team", {"description": f"note {index}"})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    parsed = Calendar.from_ical((world.apps_root / "calendar" / "me@example.com.ics").read_bytes())
    assert sorted(str(e["SUMMARY"]) for e in parsed.walk("VEVENT")) == sorted(f"Event {i}" for i in range(12))
    team = Calendar.from_ical((world.apps_root / "calendar" / "team.ics").read_bytes())
    review = next(e for e in team.walk("VEVENT") if str(e["UID"]) == "review@team")
    assert int(review["SEQUENCE"]) == 12


# ---- recurrence and time edge cases ----------------------------------------------------


def test_overridden_occurrence_replaces_the_generated_one(tmp_path):
    world = make_world(tmp_path)
    override = (
        "BEGIN:VEVENT\nUID:weekly@x\nRECURRENCE-ID:20250310T090000Z\nDTSTAMP:20250101T000000Z\n"
        "DTSTART:20250311T150000Z\nDTEND:20250311T160000Z\nSUMMARY:Weekly (moved)\nEND:VEVENT\n"
    )
    world.app_file(
        "calendar/c.ics",
        ics(
            vevent("weekly@x", "20250303T090000Z", "20250303T100000Z", "RRULE:FREQ=WEEKLY;COUNT=3\n"),
            override,
        ),
    )
    calendar = service(world)
    listed = calendar.list_events(limit=50, offset=0, time_min="2025-03-01", time_max="2025-04-01")["events"]
    assert [(e["id"], e["summary"], e["start"]["dateTime"]) for e in listed] == [
        ("weekly@x_20250303T090000Z", "weekly@x", "2025-03-03T09:00:00+00:00"),
        ("weekly@x_20250310T090000Z", "Weekly (moved)", "2025-03-11T15:00:00+00:00"),
        ("weekly@x_20250317T090000Z", "weekly@x", "2025-03-17T09:00:00+00:00"),
    ]
    assert [e["id"] for e in calendar.list_events(limit=50, offset=0)["events"]] == ["weekly@x"]
    calendar.delete_event("weekly@x_20250310T090000Z")  # the moved occurrence: EXDATE + override removed
    text = (world.apps_root / "calendar" / "c.ics").read_text()
    assert "RECURRENCE-ID" not in text and "EXDATE:20250310T090000Z" in text
    listed = calendar.list_events(limit=50, offset=0, time_min="2025-03-01", time_max="2025-04-01")["events"]
    assert [e["id"] for e in listed] == ["weekly@x_20250303T090000Z", "weekly@x_20250317T090000Z"]
    calendar.delete_event("weekly@x")
    assert "weekly@x" not in (world.apps_root / "calendar" / "c.ics").read_text()


def test_all_day_recurrence_and_floating_times_use_the_default_zone(tmp_path):
    world = make_world(tmp_path)
    world.app_file(
        "calendar/c.ics",
        ics(
            vevent("bday@x", "20200315", "20200316", "RRULE:FREQ=YEARLY\n")
            .replace("DTSTART:", "DTSTART;VALUE=DATE:")
            .replace("DTEND:", "DTEND;VALUE=DATE:"),
            vevent("float@x", "20250315T090000", "20250315T100000"),
        ),
    )
    calendar = service(world, time_zone="Asia/Kolkata")
    listed = calendar.list_events(limit=50, offset=0, time_min="2025-03-15", time_max="2025-03-16")["events"]
    assert [(e["id"], e["start"]) for e in listed] == [
        ("bday@x_20250315", {"date": "2025-03-15"}),
        ("float@x", {"dateTime": "2025-03-15T09:00:00+05:30", "timeZone": "Asia/Kolkata"}),
    ]


def test_unbounded_series_is_capped_and_open_range_spans_a_year(tmp_path):
    world = make_world(tmp_path)
    world.app_file(
        "calendar/c.ics", ics(vevent("daily@x", "20200101T080000Z", "20200101T083000Z", "RRULE:FREQ=DAILY\n"))
    )
    calendar = service(world)
    result = calendar.list_events(limit=10, offset=0, time_min="2025-01-01")
    assert result["total"] == 366 and result["events"][0]["id"] == "daily@x_20250101T080000Z"


def test_new_events_file_follows_options(tmp_path):
    world = make_world(tmp_path)
    assert service(world).user_file().name == "me@example.com.ics"
    anonymous = CalendarService(ServerContext.create(world.fs_root, world.apps_root, {}))
    assert anonymous.user_file().name == "calendar.ics"
    hostile = CalendarService(
        ServerContext.create(world.fs_root, world.apps_root, {"user_email": "../../evil"})
    )
    with pytest.raises(ToolError) as error:
        hostile.user_file()
    assert error.value.code == "invalid_argument"


def test_calendar_files_linked_out_of_the_app_data_are_ignored(tmp_path):
    world = calendar_world(tmp_path)
    outside = tmp_path / "outside.ics"
    outside.write_text(ics(vevent("secret@out", "20250310T090000Z", "20250310T100000Z")))
    os.symlink(outside, world.apps_root / "calendar" / "link.ics")
    ids = [e["id"] for e in service(world).list_events(limit=50, offset=0)["events"]]
    assert "secret@out" not in ids and len(ids) == 4


def test_create_never_follows_a_user_file_linked_out(tmp_path):
    world = make_world(tmp_path)
    outside = tmp_path / "outside.ics"
    outside.write_text(ics(vevent("secret@out", "20250310T090000Z", "20250310T100000Z")))
    (world.apps_root / "calendar").mkdir()
    os.symlink(outside, world.apps_root / "calendar" / "me@example.com.ics")
    with pytest.raises(ToolError) as error:
        create(service(world), "x")
    assert error.value.code == "bad_data"
    assert "SUMMARY:x" not in outside.read_text()


def test_create_adds_a_vtimezone_only_when_the_file_lacks_it(tmp_path):
    world = make_world(tmp_path)
    path = world.app_file("calendar/me@example.com.ics", TEAM_ICS.encode())  # has America/New_York
    calendar = service(world)  # cold cache: the zones are read from the file itself
    for zone_name in ("America/New_York", "Europe/Paris", "Europe/Paris"):
        calendar.create_event(
            summary=zone_name,
            start=EventTime(dateTime="2025-05-01T09:00:00", timeZone=zone_name),
            end=EventTime(dateTime="2025-05-01T10:00:00", timeZone=zone_name),
            description=None,
            location=None,
            attendees=None,
            color_id=None,
            reminders=None,
            recurrence=None,
        )
    zones = [str(z["TZID"]) for z in Calendar.from_ical(path.read_bytes()).walk("VTIMEZONE")]
    assert sorted(zones) == ["America/New_York", "Europe/Paris"]


# ---- quick scan vs full parse ----------------------------------------------------------

SCAN_CASES = [
    ("DTSTART:20250310T090000Z\nDTEND:20250310T100000Z\n", True),
    ("DTSTART:20250310T090000\nDTEND:20250310T100000\n", True),
    ("DTSTART;VALUE=DATE:20250310\nDTEND;VALUE=DATE:20250312\n", True),
    ('DTSTART;TZID="Europe/Paris":20250310T090000\nDTEND;TZID=Europe/Paris:20250310T100000\n', True),
    ("DTSTART;TZID=Europe/Paris:20250310T090000\n", True),  # no DTEND
    ("DTSTART:20250310T090000Z\nDURATION:PT1H\n", False),
    ("DTSTART;TZID=Eastern Standard Time:20250310T090000\nDTEND:20250310T100000Z\n", False),
    ("DTSTART:20250310T090000Z\nDTEND:20250310T100000Z\nRRULE:FREQ=DAILY\n", False),
    ("DTSTART:20250310T090000Z\nDTEND;VALUE=DATE:20250311\n", False),
]


@pytest.mark.parametrize(("times", "scannable"), SCAN_CASES)
def test_quick_scan_agrees_with_the_full_parse(times, scannable):
    from mcp_servers.calendar.events import start_end
    from mcp_servers.calendar.scan import scan_block
    from mcp_servers.calendar.times import instant

    block = f"BEGIN:VEVENT\nUID:scan@x\nSUMMARY:s\n{times}BEGIN:VALARM\nTRIGGER:-PT5M\nACTION:DISPLAY\nEND:VALARM\nEND:VEVENT\n"
    scanned = scan_block(block)
    assert (scanned is not None) == scannable
    if scanned is not None:
        from icalendar import Event

        start, end = start_end(Event.from_ical(block))
        assert scanned.uid == "scan@x"
        assert instant(scanned.start, UTC) == instant(start, UTC) and instant(scanned.end, UTC) == instant(
            end, UTC
        )
        assert type(scanned.start) is type(start)


def test_folded_uid_takes_the_full_parse():
    from mcp_servers.calendar.scan import scan_block

    assert scan_block("BEGIN:VEVENT\nUID:abc\n def\nDTSTART:20250310T090000Z\nEND:VEVENT\n") is None


def test_lazily_built_views_match_full_parse_views(tmp_path):
    from mcp_servers.calendar.index import parse_record

    world = calendar_world(tmp_path)
    calendar = service(world)
    for record in calendar.index.snapshot().events:
        full = parse_record(_block_of(world, record), rel=record.file, default_tz=UTC)
        assert record.view == full.view and record.begins == full.begins and record.ends == full.ends


def _block_of(world, record) -> str:
    source = (world.apps_root / "calendar" / record.file).read_text()
    layout = split_blocks(source)
    return next(b.text(source) for b in layout.blocks if f"UID:{record.uid}" in b.text(source))


def test_warm_reads_the_first_page_so_the_first_listing_parses_nothing(tmp_path, monkeypatch):
    # warm() runs in the background after a populate: the agent's first list_events (no
    # arguments) must find its events' views built, not parse them with icalendar then.
    from mcp_servers.calendar import index as index_module
    from mcp_servers.calendar.service import DEFAULT_PAGE

    world = make_world(tmp_path)
    world.app_file(
        "calendar/team.ics",
        ics(
            *(
                vevent(f"e{n:03}@team", f"2025031{n % 10}T{9 + n // 10 % 8:02}0000Z", "20250320T100000Z")
                for n in range(80)
            )
        ),
    )
    calendar = service(world)
    calendar.warm()
    parsed = []
    event_view = index_module.event_view
    monkeypatch.setattr(index_module, "event_view", lambda *a, **k: parsed.append(1) or event_view(*a, **k))
    first = calendar.list_events(limit=DEFAULT_PAGE, offset=0)
    assert len(first["events"]) == DEFAULT_PAGE and first["total"] == 80
    assert parsed == []  # every view of the first page was built by warm()
    calendar.list_events(limit=DEFAULT_PAGE, offset=DEFAULT_PAGE)
    assert len(parsed) == 80 - DEFAULT_PAGE  # the next page is parsed when shown


def test_two_worlds_with_the_same_calendar_parse_it_once_and_an_edit_stays_in_its_world(
    tmp_path, monkeypatch
):
    # Every trial's world is a new copy of its seed: a calendar content already parsed in the
    # process is not parsed again, and what one world writes is never seen by the other.
    import uuid

    from mcp_servers.calendar import index as index_module

    marker = uuid.uuid4().hex  # a content no other test parsed in this process
    content = ics(
        *(vevent(f"{marker}-{n}@team", f"2025031{n}T090000Z", f"2025031{n}T100000Z") for n in range(3))
    )
    worlds = [make_world(tmp_path / name) for name in ("a", "b")]
    for world in worlds:
        world.app_file("calendar/team.ics", content)
    parses = []
    split = index_module.split_blocks
    monkeypatch.setattr(index_module, "split_blocks", lambda source: parses.append(1) or split(source))
    first, second = (service(world) for world in worlds)

    listed = first.list_events(limit=10, offset=0)
    assert second.list_events(limit=10, offset=0) == listed and listed["total"] == 3
    assert len(parses) == 1

    first.update_event(f"{marker}-0@team", {"summary": "renamed in world a"})  # rewrites team.ics
    create(first, "only in world a")
    summaries = {event["summary"] for event in first.list_events(limit=10, offset=0)["events"]}
    assert {"renamed in world a", "only in world a"} <= summaries
    assert second.list_events(limit=10, offset=0) == listed
    assert "renamed in world a" not in (worlds[1].apps_root / "calendar" / "team.ics").read_text()
