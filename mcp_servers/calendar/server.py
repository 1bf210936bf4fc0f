"""The calendar tools (reference names and arguments), declared once for both modes."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, overload

from pydantic import Field, ValidationError

from atoll.errors import ErrorCode
from mcp_servers._core.definition import ServerDefinition
from mcp_servers._core.errors import ToolError
from mcp_servers._core.options import ServerOptions
from mcp_servers.calendar.models import Attendee, EventTime, Reminders
from mcp_servers.calendar.results import Event, EventDeleted, EventPage
from mcp_servers.calendar.service import DEFAULT_PAGE, CalendarService


class CalendarOptions(ServerOptions):
    """Options of the calendar server."""

    time_zone: str | None = Field(None, description="IANA zone of times given without one (default UTC)")
    calendar_file: str | None = Field(None, description=".ics file new events go to (default calendar.ics)")


SERVER = ServerDefinition(
    "calendar",
    consolidated_name="calendar",
    description=(
        "The user's calendar (.ics files): list events by start time or within a date range "
        "(recurring events expanded), read, create, update and delete events."
    ),
    state=CalendarService,
    options=CalendarOptions,
)

Limit = Annotated[int, Field(ge=1, le=100, description="events per page (at most 100)")]
Offset = Annotated[int, Field(ge=0, description="events to skip (pagination)")]
EventId = Annotated[
    str, Field(min_length=1, max_length=1000, description="the event's id (its iCalendar UID)")
]
When = EventTime | str


@overload
def _when(value: When, argument: str) -> EventTime: ...
@overload
def _when(value: When | None, argument: str) -> EventTime | None: ...
def _when(value: When | None, argument: str) -> EventTime | None:
    """Accept a bare ISO string as shorthand for ``{"dateTime": …}`` / ``{"date": …}``."""
    if value is None or isinstance(value, EventTime):
        return value
    text = value.strip()
    if not text:
        raise ToolError(ErrorCode.invalid_argument, f"{argument}: empty date", argument=argument)
    if text.startswith("{"):  # the object sent as JSON text
        try:
            return EventTime.model_validate(json.loads(text))
        except (ValueError, ValidationError) as exc:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument}: {text[:80]!r} is not a valid time object ({exc})",
                argument=argument,
            ) from None
    return EventTime(date=text) if len(text) == 10 else EventTime(dateTime=text)


def _unless_blank(value: Any) -> Any:
    """None for an object given with no field at all (``{}``): some models send every argument,
    and an empty object must not wipe an event's reminders or move it."""
    if isinstance(value, (EventTime, Reminders)) and not value.model_fields_set:
        return None
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _event_id(value: str) -> str:
    if any(ord(ch) < 32 for ch in value):
        raise ToolError(
            ErrorCode.invalid_argument, "event_id: contains a control character", argument="event_id"
        )
    return value.strip()


@SERVER.tool(action="list", read_only=True)
def list_events(
    calendar: CalendarService,
    limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
    time_min: str | None = None,
    time_max: str | None = None,
    query: str | None = None,
) -> EventPage:
    """List events sorted by start time, paginated.

    Without time_min/time_max every event is listed once (a recurring series as its first
    occurrence, with its recurrence rules). With a range, the events overlapping it are
    listed and recurring events are expanded into their occurrences (ids
    `<event_id>_<start in UTC>`). Unreadable calendar data is skipped and named in
    `problems`.

    Args:
        limit: events per page (1-100, default 50).
        offset: events to skip.
        time_min: range start, YYYY-MM-DD or ISO date-time (zone-less values are in the calendar's zone).
        time_max: range end (exclusive), same forms; without it a range spans one year from time_min.
        query: case-insensitive text to find in summary, description, location or attendees.
    """
    return EventPage.from_fields(
        calendar.list_events(limit=limit, offset=offset, time_min=time_min, time_max=time_max, query=query)
    )


@SERVER.tool(action="read", read_only=True)
def read_event(calendar: CalendarService, event_id: EventId) -> Event:
    """Read one event: times with time zone, attendees, reminders, recurrence, status.

    Args:
        event_id: the event's id, or an occurrence id `<event_id>_<start>` from a range listing.
    """
    return Event.from_fields(calendar.read_event(_event_id(event_id)))


@SERVER.tool(action="create")
def create_event(
    calendar: CalendarService,
    summary: Annotated[str, Field(max_length=1000)],
    start: When,
    end: When,
    description: str | None = None,
    location: str | None = None,
    attendees: list[Attendee] | None = None,
    colorId: str | None = None,  # noqa: N803 - Google Calendar's argument name
    reminders: Reminders | None = None,
    recurrence: list[str] | None = None,
) -> Event:
    """Create an event in the user's calendar; returns the event as stored.

    Start must be before end. Times keep their time zone (written as TZID with a VTIMEZONE).

    Args:
        summary: the event title.
        start: {"dateTime": "2025-03-04T10:00:00", "timeZone": "America/New_York"} or {"date": "2025-03-04"}.
        end: same form as start (all-day end dates are exclusive).
        description: free text.
        location: free text.
        attendees: [{"email", "displayName", "responseStatus"}].
        colorId: Google Calendar color id ("1"-"11").
        reminders: {"useDefault": false, "overrides": [{"method": "popup"|"email", "minutes": 30}]}.
        recurrence: iCalendar lines, e.g. ["RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=10", "EXDATE;TZID=America/New_York:20250310T100000"].
    """
    created = calendar.create_event(
        summary=summary,
        start=_when(start, "start"),
        end=_when(end, "end"),
        description=description,
        location=location,
        attendees=attendees,
        color_id=colorId,
        reminders=reminders,
        recurrence=recurrence,
    )
    return Event.from_fields(created)


@SERVER.tool(action="update")
def update_event(
    calendar: CalendarService,
    event_id: EventId,
    summary: Annotated[str | None, Field(max_length=1000)] = None,
    start: When | None = None,
    end: When | None = None,
    description: str | None = None,
    location: str | None = None,
    attendees: list[Attendee] | None = None,
    colorId: str | None = None,  # noqa: N803 - Google Calendar's argument name
    reminders: Reminders | None = None,
    recurrence: list[str] | None = None,
    status: Literal["confirmed", "tentative", "cancelled"] | None = None,
) -> Event:
    """Change some fields of an event; everything not given (including unknown properties,
    alarms and recurrence) is kept. Moving only the start keeps the duration.

    Args:
        event_id: the event to change.
        summary: new title.
        start: new start ({"dateTime", "timeZone"} or {"date"}).
        end: new end.
        description: new description ("" removes it).
        location: new location ("" removes it).
        attendees: the full new attendee list ([] removes all).
        colorId: new color id ("" removes it).
        reminders: new reminders (replace the existing ones).
        recurrence: new recurrence lines ([] makes the event single).
        status: confirmed, tentative or cancelled.
    """
    changes = {
        "summary": summary,
        "start": _when(_unless_blank(start), "start"),
        "end": _when(_unless_blank(end), "end"),
        "description": description,
        "location": location,
        "attendees": attendees,
        "color_id": colorId,
        "reminders": _unless_blank(reminders),
        "recurrence": recurrence,
        "status": status,
    }
    if all(value is None for value in changes.values()):
        raise ToolError(
            ErrorCode.invalid_argument, "update_event: give at least one field to change", argument="event_id"
        )
    return Event.from_fields(calendar.update_event(_event_id(event_id), changes))


@SERVER.tool(action="delete", destructive=True)
def delete_event(calendar: CalendarService, event_id: EventId) -> EventDeleted:
    """Delete an event from its calendar file: a recurring event with all its occurrences, or,
    given an occurrence id `<event_id>_<start>`, only that occurrence (added as an EXDATE).

    Args:
        event_id: the event or occurrence to delete.
    """
    return EventDeleted.from_fields(calendar.delete_event(_event_id(event_id)))
