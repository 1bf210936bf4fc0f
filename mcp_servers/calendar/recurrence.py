"""Expanding a recurring VEVENT (RRULE, RDATE, EXDATE) into occurrences within a range.

Rules are expanded in the event's own wall-clock time (as RFC 5545 requires: a weekly
10:00 New York meeting stays at 10:00 across daylight-saving changes), then placed in its
zone and compared as UTC instants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from mcp_servers.calendar.times import When, instant

_dateutil_rrule = lazy_module("dateutil.rrule")
icalendar = lazy_module("icalendar")

if TYPE_CHECKING:
    from dateutil.rrule import rruleset
    from icalendar import Event


#: Most occurrences produced for one series in one call (guards against FREQ=SECONDLY).
MAX_OCCURRENCES = 2000


@dataclass(frozen=True)
class Series:
    """What expansion needs from a recurring VEVENT."""

    start: When
    duration: timedelta
    rules: tuple[str, ...]  # RRULE values as text, UNTIL already in local wall time
    rdates: tuple[datetime, ...]  # local wall time
    exdates: tuple[datetime, ...]  # local wall time
    zone: tzinfo | None  # None: all-day or floating (read in the default zone)


def _local(value: Any, zone: tzinfo | None, start_time: time) -> datetime | None:
    """A DTSTART/EXDATE/RDATE/UNTIL value as naive wall time of the series' zone."""
    if isinstance(value, tuple):  # RDATE;VALUE=PERIOD
        value = value[0]
    if isinstance(value, datetime):
        if value.tzinfo is not None and zone is not None:
            value = value.astimezone(zone)
        elif value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime.combine(value, start_time)
    return None


def _values(event: Event, name: str) -> list[Any]:
    prop = event.get(name)
    if prop is None:
        return []
    out: list[Any] = []
    for item in prop if isinstance(prop, list) else [prop]:
        for dt in getattr(item, "dts", []):
            out.append(dt.dt)
    return out


def series_of(event: Event, start: When, end: When) -> Series | None:
    """The recurrence of ``event`` or None when it has no RRULE/RDATE."""
    if "RRULE" not in event and "RDATE" not in event:
        return None
    zone = start.tzinfo if isinstance(start, datetime) else None
    start_time = start.timetz().replace(tzinfo=None) if isinstance(start, datetime) else time()
    rules = []
    rrules = event.get("RRULE")
    for rule in rrules if isinstance(rrules, list) else ([rrules] if rrules is not None else []):
        rule = icalendar.vRecur(rule)
        if "UNTIL" in rule:
            until = rule["UNTIL"][0] if isinstance(rule["UNTIL"], list) else rule["UNTIL"]
            local = _local(until, zone, time(23, 59, 59) if not isinstance(until, datetime) else start_time)
            if local is not None:
                rule["UNTIL"] = [local]
        rules.append(rule.to_ical().decode("ascii"))
    rdates = tuple(v for v in (_local(x, zone, start_time) for x in _values(event, "RDATE")) if v)
    exdates = tuple(v for v in (_local(x, zone, start_time) for x in _values(event, "EXDATE")) if v)
    duration = instant(end, UTC) - instant(start, UTC)
    return Series(start, duration, tuple(rules), rdates, exdates, zone)


@lru_cache(maxsize=4096)
def _rule_set(series: Series, zone: tzinfo) -> tuple[rruleset, datetime]:
    """The dateutil rule set of a series (cached: range listings expand the same series often)."""
    first = series.start if isinstance(series.start, datetime) else datetime.combine(series.start, time())
    first = (
        first.replace(tzinfo=None) if first.tzinfo is None else first.astimezone(zone).replace(tzinfo=None)
    )
    rules = _dateutil_rrule.rruleset()
    for text in series.rules:
        rules.rrule(_dateutil_rrule.rrulestr(text, dtstart=first, ignoretz=True))
    rules.rdate(first)  # DTSTART is always the first occurrence
    for value in series.rdates:
        rules.rdate(value)
    for value in series.exdates:
        rules.exdate(value)
    return rules, first


def occurrences(
    series: Series, window_start: datetime, window_end: datetime, default_tz: tzinfo
) -> list[When]:
    """Starts of the occurrences overlapping ``[window_start, window_end)`` (aware instants).

    All-day series yield dates; timed series yield aware datetimes in the series' zone.
    Raises ValueError when a rule cannot be read.
    """
    zone = series.zone if series.zone is not None else default_tz
    rules, first = _rule_set(series, zone)
    # Slack of a day each side: wall time differs from UTC by at most 14 hours.
    lower = (window_start - series.duration - timedelta(days=1)).astimezone(zone).replace(tzinfo=None)
    upper = (window_end + timedelta(days=1)).astimezone(zone).replace(tzinfo=None)
    found: list[When] = []
    for local in rules.xafter(max(lower, first), count=MAX_OCCURRENCES * 2, inc=True):
        if local > upper or len(found) >= MAX_OCCURRENCES:
            break
        value: When = local.date() if not isinstance(series.start, datetime) else _place(local, series.zone)
        begins = instant(value, default_tz)
        if begins < window_end and begins + series.duration > window_start:
            found.append(value)
    return found


def _place(local: datetime, zone: tzinfo | None) -> datetime:
    return local if zone is None else local.replace(tzinfo=zone)
