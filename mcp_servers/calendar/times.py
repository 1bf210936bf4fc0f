"""Dates and times of calendar events: agent input to iCalendar values and back.

Every comparison (sorting, range filters, start < end) is done on aware UTC instants, so
all-day dates, floating (zone-less) times and zoned times mix without naive/aware errors.
All-day dates and floating times are read in the calendar's default zone (server option
``time_zone``, UTC when unset).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core.errors import ToolError

_icalendar_timezone = lazy_module("icalendar.timezone")

When = date | datetime  # a DTSTART/DTEND value: a date (all-day) or a datetime


def zone(name: str, *, argument: str) -> tzinfo:
    """The time zone called ``name`` (IANA, e.g. ``Europe/Paris``; ``UTC``/``Z`` accepted).

    Raises ToolError ``invalid_argument`` for an unknown name.
    """
    text = name.strip()
    if text.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return UTC
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: unknown time zone {text[:60]!r} (use an IANA name like 'Europe/Paris')",
            argument=argument.split(".")[0],
        ) from None


def zone_name(value: datetime) -> str | None:
    """The TZID of an aware datetime (``UTC`` for UTC), None when floating or unnamed."""
    if value.tzinfo is None:
        return None
    if value.utcoffset() == timedelta(0) and value.tzinfo in (UTC,):
        return "UTC"
    name = _icalendar_timezone.tzid_from_dt(value)
    return name or None


def instant(value: When, default_tz: tzinfo) -> datetime:
    """The aware UTC instant at which ``value`` begins (dates at midnight of ``default_tz``)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=default_tz)
        return aware.astimezone(UTC)
    return datetime.combine(value, time(), tzinfo=default_tz).astimezone(UTC)


def parse_datetime_text(text: str, *, argument: str) -> datetime | date:
    """``YYYY-MM-DD`` as a date, an ISO 8601 date-time (``Z`` or offset optional) as a datetime.

    Raises ToolError ``invalid_argument`` naming ``argument``.
    """
    value = text.strip()
    try:
        if len(value) == 10:
            return date.fromisoformat(value)
        return datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {value[:60]!r} is not an ISO date (YYYY-MM-DD) or date-time (YYYY-MM-DDTHH:MM[:SS][+HH:MM])",
            argument=argument.split(".")[0],
        ) from None


def parse_bound(text: str | None, *, argument: str, default_tz: tzinfo) -> datetime | None:
    """A range bound (``time_min``/``time_max``) as an aware UTC instant, or None."""
    if text is None or not str(text).strip():
        return None
    return instant(parse_datetime_text(str(text), argument=argument), default_tz)


def to_ical_value(
    date_time: str | None, day: str | None, zone_text: str | None, *, argument: str, default_tz: tzinfo
) -> When:
    """The DTSTART/DTEND value for a ``{dateTime|date, timeZone}`` input.

    A date-time without offset is wall time in ``timeZone`` (else the default zone); one
    with an offset is converted to ``timeZone`` when given, else kept as UTC.
    """
    if date_time and str(date_time).strip():
        parsed = parse_datetime_text(str(date_time), argument=f"{argument}.dateTime")
        if not isinstance(parsed, datetime):
            parsed = datetime.combine(parsed, time())
        target = zone(zone_text, argument=f"{argument}.timeZone") if zone_text else None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=target or default_tz)
        return parsed.astimezone(target or UTC)
    if day and str(day).strip():
        parsed = parse_datetime_text(str(day), argument=f"{argument}.date")
        return parsed.date() if isinstance(parsed, datetime) else parsed
    raise ToolError(ErrorCode.invalid_argument, f"{argument}: give 'dateTime' or 'date'", argument=argument)


def when_view(value: When, default_tz: tzinfo) -> dict[str, Any]:
    """The API form of a DTSTART/DTEND value: ``{"date"}`` or ``{"dateTime", "timeZone"}``."""
    if not isinstance(value, datetime):
        return {"date": value.isoformat()}
    if value.tzinfo is None:  # floating time: shown in the default zone
        value = value.replace(tzinfo=default_tz)
    return {"dateTime": value.isoformat(), "timeZone": zone_name(value) or "UTC"}


def stamp_view(value: Any) -> str | None:
    """An ISO text for CREATED/LAST-MODIFIED/DTSTAMP-like values."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return None


def compact_utc(value: datetime | date) -> str:
    """``20250304T150000Z`` (datetimes, in UTC) or ``20250304`` (dates): instance id suffixes."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return value.strftime("%Y%m%d")


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
