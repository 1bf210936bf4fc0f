"""Argument shapes of the calendar tools (Google Calendar API names, snake_case accepted)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)


class EventTime(_Input):
    """When an event starts or ends: ``dateTime`` (timed) or ``date`` (all-day)."""

    dateTime: str | None = Field(
        None,
        validation_alias=AliasChoices("dateTime", "date_time", "datetime"),
        description="ISO date-time, e.g. 2025-03-04T10:00:00 (wall time in timeZone) or 2025-03-04T15:00:00Z",
    )
    date: str | None = Field(None, description="YYYY-MM-DD for an all-day event (end date is exclusive)")
    timeZone: str | None = Field(
        None,
        validation_alias=AliasChoices("timeZone", "time_zone", "timezone"),
        description="IANA time zone, e.g. America/New_York; kept on the event as its TZID",
    )


class Attendee(_Input):
    email: str = Field(description="attendee email address")
    displayName: str | None = Field(
        None, validation_alias=AliasChoices("displayName", "display_name", "name")
    )
    responseStatus: Literal["needsAction", "accepted", "declined", "tentative"] | None = Field(
        None, validation_alias=AliasChoices("responseStatus", "response_status")
    )
    optional: bool | None = None


class ReminderOverride(_Input):
    method: Literal["popup", "email"] = "popup"
    minutes: int = Field(ge=0, le=40320, description="minutes before the start (at most 4 weeks)")


class Reminders(_Input):
    useDefault: bool = Field(False, validation_alias=AliasChoices("useDefault", "use_default"))
    overrides: list[ReminderOverride] = Field(default_factory=list, max_length=5)
