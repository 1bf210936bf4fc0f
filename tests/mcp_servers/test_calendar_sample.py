"""Calendar (and the sample's reference steps for calendar and chat) against the sample worlds."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from icalendar import Calendar

from mcp_servers import get_definition
from tests.mcp_servers.helpers import World, open_session

WORLDS = ["world_keystone_consulting", "world_atlas_mna"]


@pytest.fixture(scope="session")
def sample_benchmark(tmp_path_factory) -> Path:
    from tests.shared_sample import fresh_sample_benchmark

    out = tmp_path_factory.mktemp("sample") / "bench"
    fresh_sample_benchmark(out)
    return out


def sample_world(benchmark: Path, world_id: str, tmp_path: Path) -> tuple[World, dict]:
    """Unpack one sample world; returns it and its description (user_name, user_email, ...)."""
    base = tmp_path / "world"
    with zipfile.ZipFile(benchmark / "world_files_zipped" / f"{world_id}.zip") as archive:
        archive.extractall(base)
    (base / "filesystem").mkdir(exist_ok=True)
    (base / ".apps_data").mkdir(exist_ok=True)
    description = next(
        w
        for w in json.loads((benchmark / "world_descriptions.json").read_text())
        if w["world_id"] == world_id
    )
    return World(base=base, fs_root=base / "filesystem", apps_root=base / ".apps_data"), description


def options_of(description: dict) -> dict:
    return {"user_email": description["user_email"], "user_name": description["user_name"]}


def series_in_files(world: World) -> dict[str, int]:
    """Events per file counted with icalendar alone (a series and its overrides count once)."""
    counts = {}
    for path in sorted((world.apps_root / "calendar").rglob("*.ics")):
        events = Calendar.from_ical(path.read_bytes()).walk("VEVENT")
        counts[path.name] = len({str(e["UID"]) for e in events})
    return counts


@pytest.mark.parametrize("world_id", WORLDS)
def test_every_sample_event_is_listed_and_readable(sample_benchmark, tmp_path, world_id):
    world, description = sample_world(sample_benchmark, world_id, tmp_path)
    expected = series_in_files(world)
    with open_session("calendar", world, options=options_of(description)) as session:
        listed = session.ok("list_events", {"limit": 100})
        assert "problems" not in listed
        assert listed["total"] == sum(expected.values()) > 0
        starts = [e["start"].get("dateTime") or e["start"]["date"] for e in listed["events"]]
        assert len(starts) == listed["total"]
        for event in listed["events"]:
            assert session.ok("read_event", {"event_id": event["id"]})["summary"] == event["summary"]
        by_file = {}
        for event in listed["events"]:
            by_file[event["calendarFile"]] = by_file.get(event["calendarFile"], 0) + 1
        assert by_file == expected


def test_keystone_next_steerco_comes_from_rrule_expansion(sample_benchmark, tmp_path):
    world, description = sample_world(sample_benchmark, "world_keystone_consulting", tmp_path)
    with open_session("calendar", world, options=options_of(description)) as session:
        march = session.ok(
            "list_events",
            {"time_min": "2024-03-01T12:00:00", "time_max": "2024-04-01", "query": "steerco", "limit": 100},
        )
    starts = [e["start"]["dateTime"][:10] for e in march["events"] if e.get("recurringEventId")]
    assert starts and starts[0] == "2024-03-14"


@pytest.mark.parametrize("world_id", WORLDS)
def test_updating_a_sample_series_keeps_rules_alarms_and_other_events(sample_benchmark, tmp_path, world_id):
    world, description = sample_world(sample_benchmark, world_id, tmp_path)
    with open_session("calendar", world, options=options_of(description)) as session:
        events = session.ok("list_events", {"limit": 100})["events"]
        series = next(e for e in events if e.get("recurrence"))
        path = world.apps_root / "calendar" / series["calendarFile"]
        before = {str(e["UID"]): e for e in Calendar.from_ical(path.read_bytes()).walk("VEVENT")}
        session.ok("update_event", {"event_id": series["id"], "summary": "Renamed"})
        after = {str(e["UID"]): e for e in Calendar.from_ical(path.read_bytes()).walk("VEVENT")}
        again = session.ok("read_event", {"event_id": series["id"]})
    assert again["recurrence"] == series["recurrence"] and again["reminders"] == series["reminders"]
    assert again["attendees"] == series.get("attendees", again.get("attendees"))
    assert set(after) == set(before)
    for uid, event in before.items():
        if uid != series["id"]:
            assert after[uid].to_ical() == event.to_ical()
    assert len(after[series["id"]].walk("VALARM")) == len(before[series["id"]].walk("VALARM"))


def _reference_steps(benchmark: Path) -> list[tuple[str, str, dict]]:
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    steps = []
    for task in tasks:
        for step in (task.get("reference_solution") or {}).get("steps", []):
            if step["tool"].startswith(("calendar_", "chat_")):
                steps.append((task["world_id"], step["tool"], step["arguments"]))
    return steps


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
def test_sample_reference_steps_for_calendar_and_chat_succeed(sample_benchmark, tmp_path, mode):
    steps = _reference_steps(sample_benchmark)
    assert steps, "the sample has calendar/chat reference steps"
    for index, (world_id, gateway_tool, arguments) in enumerate(steps):
        world, description = sample_world(sample_benchmark, world_id, tmp_path / str(index))
        server, tool = gateway_tool.split("_", 1)
        with open_session(server, world, mode=mode, options=options_of(description)) as session:
            if mode == "consolidated":
                action = get_definition(server).find(tool).action
                session.ok(server, {"action": action, **arguments})
            else:
                session.ok(tool, arguments)
        if tool == "create_event":
            user_file = world.apps_root / "calendar" / f"{description['user_email']}.ics"
            summaries = [str(e["SUMMARY"]) for e in Calendar.from_ical(user_file.read_bytes()).walk("VEVENT")]
            assert arguments["summary"] in summaries
        if tool == "post_message":
            messages = next((world.apps_root / "chat").rglob(f"{arguments['channel_id']}/messages.json"))
            assert json.loads(messages.read_text())["messages"][-1]["text"] == arguments["message"]
