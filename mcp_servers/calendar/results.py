"""What the calendar tools return (their output schemas): Google Calendar's event shape."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_servers._core.outputs import ResultModel


class EventTime(ResultModel):
    """``{"dateTime", "timeZone"}`` for a timed event, ``{"date"}`` for an all-day one."""

    dateTime: str | None = None  # noqa: N815 - Google Calendar's names
    date: str | None = None
    timeZone: str | None = None  # noqa: N815


class Event(ResultModel):
    """An event as stored; properties atoll does not model are kept and shown too."""

    id: str
    summary: str | None = None
    description: str | None = None
    location: str | None = None
    start: EventTime | None = None
    end: EventTime | None = None
    status: str | None = None
    organizer: dict[str, Any] | None = None
    attendees: list[dict[str, Any]] | None = None
    colorId: str | None = None  # noqa: N815
    reminders: dict[str, Any] | None = None
    recurrence: list[str] | None = None
    created: str | None = None
    updated: str | None = None
    calendarFile: str | None = Field(None, description="the .ics file holding the event")  # noqa: N815
    originalStartTime: EventTime | None = Field(None, description="an occurrence's original start")  # noqa: N815
    recurringEventId: str | None = Field(None, description="an occurrence's series")  # noqa: N815


class EventPage(ResultModel):
    events: list[Event]
    total: int
    offset: int
    limit: int
    has_more: bool
    problems: list[str] | None = Field(None, description="calendar data that could not be read")


class EventDeleted(ResultModel):
    deleted: bool
    id: str
    summary: str | None = None
    recurringEventId: str | None = None  # noqa: N815
