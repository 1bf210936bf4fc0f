"""Write .ics calendars (recurring, all-day, time zones, attendees, reminders).

An event spec is a dict: ``uid``, ``summary``, ``start``/``end`` (aware datetimes, or
dates for all-day events), optional ``rrule`` (dict as icalendar takes it), ``location``,
``description``, ``organizer`` and ``attendees`` (people dicts; ``partstat`` optional) and
``alarm_minutes`` (a display reminder that many minutes before).
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from icalendar import Alarm, Calendar, Event, Timezone, vCalAddress, vText

from atoll_sample._files import FROZEN_AT


def write_calendar(path: Path, events: list[dict[str, Any]], *, name: str) -> None:
    """Write ``events`` to the .ics at ``path`` (replaced), with VTIMEZONEs for every TZID."""
    path.parent.mkdir(parents=True, exist_ok=True)
    calendar = Calendar()
    calendar.add("prodid", "-//atoll sample//calendar//EN")
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", name)
    zones = sorted(
        {
            str(spec[key].tzinfo)
            for spec in events
            for key in ("start", "end")
            if getattr(spec[key], "tzinfo", None)
        }
    )
    for zone in zones:
        if zone != "UTC":
            # A bounded range keeps the VTIMEZONE short; sorted TZIDs keep the file byte-stable.
            calendar.add_component(
                Timezone.from_tzinfo(ZoneInfo(zone), zone, date(2023, 1, 1), date(2026, 1, 1))
            )
    for spec in events:
        calendar.add_component(_event(spec))
    path.write_bytes(calendar.to_ical())


def _person(person: dict[str, str], role: str | None = None, partstat: str | None = None) -> vCalAddress:
    address = vCalAddress(f"mailto:{person['email']}")
    address.params["cn"] = vText(person["name"])
    if role:
        address.params["role"] = vText(role)
    if partstat:
        address.params["partstat"] = vText(partstat)
    return address


def _event(spec: dict[str, Any]) -> Event:
    event = Event()
    event.add("uid", spec["uid"])
    event.add("dtstamp", FROZEN_AT.replace(tzinfo=None))
    event.add("summary", spec["summary"])
    event.add("dtstart", spec["start"])
    event.add("dtend", spec["end"])
    if spec.get("rrule"):
        event.add("rrule", spec["rrule"])
    for key in ("location", "description"):
        if spec.get(key):
            event.add(key, spec[key])
    if spec.get("organizer"):
        event.add("organizer", _person(spec["organizer"]))
    for attendee in spec.get("attendees", []):
        event.add("attendee", _person(attendee, "REQ-PARTICIPANT", attendee.get("partstat", "ACCEPTED")))
    event.add("status", spec.get("status", "CONFIRMED"))
    if spec.get("alarm_minutes"):
        alarm = Alarm()
        alarm.add("action", "DISPLAY")
        alarm.add("description", "Reminder")
        alarm.add("trigger", -timedelta(minutes=spec["alarm_minutes"]))
        event.add_component(alarm)
    return event
