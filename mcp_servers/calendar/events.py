"""One VEVENT: its API view (Google Calendar shape) and applying tool input to it.

Changes touch only the properties a caller names; every other property, parameter and
sub-component of the VEVENT (unknown X- properties, alarms, recurrence lines) is kept as
icalendar parsed it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.ics import address_email
from mcp_servers._core.errors import ToolError
from mcp_servers.calendar.models import Attendee, Reminders
from mcp_servers.calendar.times import When, instant, stamp_view, when_view

icalendar = lazy_module("icalendar")

if TYPE_CHECKING:
    from icalendar import Event, vCalAddress


#: Where Google's ``colorId`` lives in the .ics (no standard property carries it).
COLOR_PROPERTY = "X-GOOGLE-COLOR-ID"
RECURRENCE_PROPERTIES = ("RRULE", "RDATE", "EXDATE", "EXRULE")
_PARTSTAT_TO_STATUS = {
    "ACCEPTED": "accepted",
    "DECLINED": "declined",
    "TENTATIVE": "tentative",
    "NEEDS-ACTION": "needsAction",
}
_STATUS_TO_PARTSTAT = {value: key for key, value in _PARTSTAT_TO_STATUS.items()}


def _text(event: Event, name: str) -> str | None:
    value = event.get(name)
    if value is None:
        return None
    if isinstance(value, list):
        value = value[0]
    return str(value)


def start_end(event: Event) -> tuple[When, When]:
    """DTSTART and the effective end (DTEND, or DTSTART + DURATION, or the RFC default).

    Raises ValueError when DTSTART is missing or unreadable.
    """
    if "DTSTART" not in event:
        raise ValueError("VEVENT has no DTSTART")
    start = _when_value(event, "DTSTART")
    if "DTEND" in event:
        end = _when_value(event, "DTEND")
    elif "DURATION" in event:
        duration = event.decoded("DURATION")
        if not isinstance(duration, timedelta):
            raise ValueError(f"DURATION {str(event['DURATION'])[:40]!r} is not a duration")
        end = start + duration
    else:
        end = start + timedelta(days=1) if not isinstance(start, datetime) else start
    return start, end


def span(start: When, end: When) -> timedelta | None:
    """``end - start``, or None when one is a date and the other a date-time (a file may
    mix them; they do not subtract)."""
    if isinstance(start, datetime) and isinstance(end, datetime):
        return end - start
    if not isinstance(start, datetime) and not isinstance(end, datetime):
        return end - start
    return None


def _when_value(event: Event, name: str) -> When:
    try:
        value = event.decoded(name)
    except (ValueError, TypeError):
        value = None
    if not isinstance(value, date):
        raise ValueError(f"{name} {str(event.get(name))[:40]!r} is not a date or date-time")
    return value


def _person(address: Any) -> dict[str, Any]:
    view: dict[str, Any] = {"email": address_email(address)}
    params = getattr(address, "params", {}) or {}
    if params.get("CN"):
        view["displayName"] = str(params["CN"])
    status = _PARTSTAT_TO_STATUS.get(str(params.get("PARTSTAT", "")).upper())
    if status:
        view["responseStatus"] = status
    if str(params.get("ROLE", "")).upper() == "OPT-PARTICIPANT":
        view["optional"] = True
    return view


def _attendees(event: Event) -> list[dict[str, Any]]:
    values = event.get("ATTENDEE")
    if values is None:
        return []
    if not isinstance(values, list):
        values = [values]
    return [_person(value) for value in values]


def reminders_view(event: Event, start: When) -> dict[str, Any]:
    """``{"useDefault", "overrides": [{"method", "minutes"}]}`` from the VALARMs."""
    overrides = []
    for alarm in event.walk("VALARM"):
        action = str(alarm.get("ACTION", "DISPLAY")).upper()
        method = "email" if action == "EMAIL" else "popup"
        try:
            trigger = alarm.decoded("TRIGGER")
        except (KeyError, ValueError):
            continue
        if isinstance(trigger, timedelta):
            minutes = -trigger.total_seconds() / 60
        elif isinstance(trigger, datetime):
            minutes = (instant(start, UTC) - instant(trigger, UTC)).total_seconds() / 60
        else:
            continue
        overrides.append({"method": method, "minutes": round(minutes)})
    return {"useDefault": not overrides, "overrides": overrides}


def recurrence_lines(event: Event) -> list[str]:
    """The RRULE/RDATE/EXDATE/EXRULE lines exactly as iCalendar writes them (unfolded)."""
    present = [name for name in RECURRENCE_PROPERTIES if name in event]
    if not present:
        return []
    probe = icalendar.Event()
    for name in present:
        probe[name] = event[name]
    text = probe.to_ical().decode("utf-8").replace("\r\n ", "").replace("\r\n\t", "")
    return [line for line in text.split("\r\n") if line.split(";")[0].split(":")[0] in RECURRENCE_PROPERTIES]


def event_view(event: Event, *, calendar_file: str, default_tz: tzinfo) -> dict[str, Any]:
    """The API view of one VEVENT.

    Raises ValueError when the VEVENT has no UID or no readable DTSTART.
    """
    uid = _text(event, "UID")
    if not uid:
        raise ValueError("VEVENT has no UID")
    start, end = start_end(event)
    view: dict[str, Any] = {"id": uid, "summary": _text(event, "SUMMARY") or ""}
    for key, name in (("description", "DESCRIPTION"), ("location", "LOCATION")):
        text = _text(event, name)
        if text:
            view[key] = text
    view["start"] = when_view(start, default_tz)
    view["end"] = when_view(end, default_tz)
    view["status"] = (_text(event, "STATUS") or "CONFIRMED").lower()
    if "ORGANIZER" in event:
        view["organizer"] = _person(event["ORGANIZER"])
    attendees = _attendees(event)
    if attendees:
        view["attendees"] = attendees
    color = _text(event, COLOR_PROPERTY)
    if color:
        view["colorId"] = color
    view["reminders"] = reminders_view(event, start)
    recurrence = recurrence_lines(event)
    if recurrence:
        view["recurrence"] = recurrence
    if "RECURRENCE-ID" in event:
        view["recurringEventId"] = uid
        view["originalStartTime"] = when_view(event.decoded("RECURRENCE-ID"), default_tz)
    for key, name in (("created", "CREATED"), ("updated", "LAST-MODIFIED")):
        if name in event:
            stamp = stamp_view(event.decoded(name))
            if stamp:
                view[key] = stamp
    view["calendarFile"] = calendar_file
    return view


# ---- applying input --------------------------------------------------------------------


def set_text(event: Event, name: str, value: str | None) -> None:
    """Replace a text property; an empty string removes it; None leaves it alone."""
    if value is None:
        return
    event.pop(name, None)
    if value != "":
        event.add(name, value)


def set_when(event: Event, name: str, value: When) -> None:
    event.pop(name, None)
    event.add(name, value)


def person_address(email: str, name: str | None = None) -> vCalAddress:
    address = icalendar.vCalAddress(f"mailto:{email}")
    if name:
        address.params["CN"] = icalendar.vText(name)
    return address


def set_attendees(event: Event, attendees: list[Attendee]) -> None:
    """Replace ATTENDEE lines, keeping unknown parameters of attendees that stay."""
    old: dict[str, Any] = {}
    current = event.get("ATTENDEE")
    for value in current if isinstance(current, list) else ([current] if current is not None else []):
        old[_person(value)["email"].lower()] = value
    event.pop("ATTENDEE", None)
    for attendee in attendees:
        email = attendee.email.strip()
        if "@" not in email or any(ch in email for ch in "\r\n\x00"):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"attendees: {email[:60]!r} is not an email address",
                argument="attendees",
            )
        address = old.get(email.lower()) or person_address(email)
        if attendee.displayName is not None:
            address.params["CN"] = icalendar.vText(attendee.displayName)
        address.params.setdefault("ROLE", "REQ-PARTICIPANT")
        if attendee.optional is not None:
            address.params["ROLE"] = "OPT-PARTICIPANT" if attendee.optional else "REQ-PARTICIPANT"
        if attendee.responseStatus is not None:
            address.params["PARTSTAT"] = _STATUS_TO_PARTSTAT[attendee.responseStatus]
        address.params.setdefault("PARTSTAT", "NEEDS-ACTION")
        event.add("ATTENDEE", address)


def set_reminders(event: Event, reminders: Reminders, *, summary: str, user_email: str | None) -> None:
    """Replace the VALARMs with ``reminders.overrides`` (none for ``useDefault`` alone)."""
    event.subcomponents = [c for c in event.subcomponents if c.name != "VALARM"]
    for override in reminders.overrides:
        alarm = icalendar.Alarm()
        if override.method == "email":
            alarm.add("ACTION", "EMAIL")
            alarm.add("SUMMARY", summary or "Reminder")
            alarm.add("DESCRIPTION", summary or "Reminder")
            if user_email:  # RFC 5545: an EMAIL alarm names its recipients
                alarm.add("ATTENDEE", f"mailto:{user_email}")
        else:
            alarm.add("ACTION", "DISPLAY")
            alarm.add("DESCRIPTION", summary or "Reminder")
        alarm.add("TRIGGER", -timedelta(minutes=override.minutes))
        event.add_component(alarm)


def set_recurrence(event: Event, lines: list[str]) -> None:
    """Replace RRULE/RDATE/EXDATE/EXRULE with ``lines`` (``[]`` makes the event single).

    Raises ToolError ``invalid_argument`` naming the bad line.
    """
    parsed = icalendar.Event()
    for index, raw in enumerate(lines):
        line = raw.strip()
        name = line.split(";")[0].split(":")[0].upper()
        if name not in RECURRENCE_PROPERTIES or ":" not in line or any(ch in line for ch in "\r\n\x00"):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"recurrence[{index}]: {line[:80]!r} is not an RRULE:, EXDATE:, RDATE: or EXRULE: line",
                argument="recurrence",
            )
        try:
            probe = icalendar.Event.from_ical(f"BEGIN:VEVENT\r\n{line}\r\nEND:VEVENT\r\n")
            for key in probe:
                probe.decoded(key)
        except (ValueError, KeyError, TypeError) as exc:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"recurrence[{index}]: cannot read {line[:80]!r}: {exc}",
                argument="recurrence",
            ) from None
        for key, value in probe.items():
            for item in value if isinstance(value, list) else [value]:
                _append(parsed, key, item)
    for name in RECURRENCE_PROPERTIES:
        event.pop(name, None)
    for key, value in parsed.items():
        event[key] = value


def _append(target: Event, key: str, item: Any) -> None:
    existing = target.get(key)
    if existing is None:
        target[key] = item
    elif isinstance(existing, list):
        existing.append(item)
    else:
        target[key] = [existing, item]


def check_order(start: When, end: When, default_tz: tzinfo) -> None:
    """Raise ToolError ``invalid_argument`` unless start and end are of one kind and start < end."""
    if isinstance(start, datetime) != isinstance(end, datetime):
        raise ToolError(
            ErrorCode.invalid_argument,
            "start and end must both be dateTime or both be date (all-day)",
            argument="end",
        )
    if instant(end, default_tz) <= instant(start, default_tz):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"end ({_show(end)}) must be after start ({_show(start)})",
            argument="end",
        )


def _show(value: When) -> str:
    return value.isoformat() if isinstance(value, (date, datetime)) else str(value)
