"""Google Chat Takeout dates: ``Monday, January 8, 2024 at 10:15:32 AM UTC``.

Reading honours the zone label (``UTC``, ``GMT+05:30``, ``PST``, an IANA name, ...) and
tolerates the narrow no-break space newer exports put before AM/PM, a missing weekday or
seconds, and ISO 8601 text. Writing always produces the Takeout form in UTC, so sorting
never depends on the weekday name or on the server's local time.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_TAKEOUT = re.compile(
    r"^(?:(?P<weekday>[A-Za-z]+),?\s+)?(?P<month>[A-Za-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4})"
    r"(?:,?\s+at)?,?\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
    r"\s*(?P<ampm>[AaPp]\.?\s?[Mm]\.?)?\s*(?P<zone>.*)$"
)
# "Monday, January 8, 2024 at 10:15:32 AM UTC" exactly: month, day, year, hour, minute, second, AM/PM
_CANONICAL = re.compile(
    r"^[A-Za-z]+, ([A-Za-z]+) (\d{1,2}), (\d{4}) at (\d{1,2}):(\d{2}):(\d{2})[ \u202f](AM|PM) UTC$"
)
_OFFSET = re.compile(
    r"^(?:UTC|GMT)?\s*(?P<sign>[+-])(?P<hours>\d{1,2})(?::?(?P<minutes>\d{2}))?$", re.IGNORECASE
)
_MONTHS = {
    name: index
    for index, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
# Zone abbreviations Takeout writes for its users' locales (fixed offsets: the label
# already says whether daylight time applied).
_ABBREVIATIONS = {
    "UTC": 0,
    "GMT": 0,
    "Z": 0,
    "UT": 0,
    "EST": -5,
    "EDT": -4,
    "CST": -6,
    "CDT": -5,
    "MST": -7,
    "MDT": -6,
    "PST": -8,
    "PDT": -7,
    "AKST": -9,
    "AKDT": -8,
    "HST": -10,
    "AST": -4,
    "ADT": -3,
    "NST": -3.5,
    "NDT": -2.5,
    "BST": 1,
    "IST": 5.5,
    "CET": 1,
    "CEST": 2,
    "EET": 2,
    "EEST": 3,
    "WET": 0,
    "WEST": 1,
    "MSK": 3,
    "JST": 9,
    "KST": 9,
    "SGT": 8,
    "HKT": 8,
    "AEST": 10,
    "AEDT": 11,
    "ACST": 9.5,
    "ACDT": 10.5,
    "AWST": 8,
    "NZST": 12,
    "NZDT": 13,
    "BRT": -3,
    "ART": -3,
}


def _zone(label: str) -> tzinfo:
    text = label.strip().strip("()").strip()
    if not text:
        return UTC
    upper = text.upper()
    if upper in _ABBREVIATIONS:
        return timezone(timedelta(hours=_ABBREVIATIONS[upper]))
    match = _OFFSET.match(text)
    if match:
        minutes = int(match.group("hours")) * 60 + int(match.group("minutes") or 0)
        return timezone(timedelta(minutes=-minutes if match.group("sign") == "-" else minutes))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {text!r}") from None


def parse_takeout_date(text: str) -> datetime:
    """The aware UTC moment written in ``text``.

    Raises ValueError naming what could not be read.
    """
    if not isinstance(text, str):
        raise ValueError(f"date is not text: {text!r}")
    fast = _CANONICAL.match(text)
    if fast:  # what Takeout (and we) write: skip the general path, it is 4x slower
        name, day, year, hour, minute, second, ampm = fast.groups()
        month = _MONTHS.get(name.lower())
        if month is not None and 1 <= int(hour) <= 12:
            hour24 = int(hour) % 12 + (12 if ampm == "PM" else 0)
            return datetime(int(year), month, int(day), hour24, int(minute), int(second), tzinfo=UTC)
    clean = re.sub(r"[\u00a0\u202f\u2009]", " ", text).strip()
    match = _TAKEOUT.match(clean)
    if not match:
        try:
            moment = datetime.fromisoformat(clean.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"unreadable date {text[:80]!r}") from None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    month = _MONTHS.get(match.group("month").lower())
    if month is None:
        raise ValueError(f"unreadable month in date {text[:80]!r}")
    hour = int(match.group("hour"))
    ampm = (match.group("ampm") or "").replace(".", "").replace(" ", "").upper()
    if ampm:
        if not 1 <= hour <= 12:
            raise ValueError(f"hour {hour} with {ampm} in date {text[:80]!r}")
        hour = hour % 12 + (12 if ampm == "PM" else 0)
    local = datetime(
        int(match.group("year")),
        month,
        int(match.group("day")),
        hour,
        int(match.group("minute")),
        int(match.group("second") or 0),
    )
    zone = _zone(match.group("zone"))
    return local.replace(tzinfo=zone).astimezone(UTC)


# takeout_sort_key's two halves of the Takeout form, split at " at " (what _CANONICAL matches)
_DAY = re.compile(r"^[A-Za-z]+, ([A-Za-z]+) (\d{1,2}), (\d{4})\Z")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})[ \u202f](AM|PM) UTC$")
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_CACHE_LIMIT = 100_000  # distinct day and clock texts remembered (an export repeats them)


@functools.lru_cache(maxsize=_CACHE_LIMIT)
def _day(text: str) -> int | None:
    match = _DAY.match(text)
    month = _MONTHS.get(match.group(1).lower()) if match else None
    if match is None or month is None:
        return None
    try:
        return date(int(match.group(3)), month, int(match.group(2))).toordinal() - _EPOCH_DAY
    except ValueError:
        return None


@functools.lru_cache(maxsize=_CACHE_LIMIT)
def _clock(text: str) -> int | None:
    match = _CLOCK.match(text)
    if match is None:
        return None
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3))
    if not (1 <= hour <= 12 and minute < 60 and second < 60):
        return None
    return ((hour % 12 + (12 if match.group(4) == "PM" else 0)) * 60 + minute) * 60 + second


def takeout_sort_key(text: Any) -> int | None:
    """Microseconds since 1970 UTC of a date in the exact Takeout form (``Monday, January 8,
    2024 at 10:15:32 AM UTC``), without making a ``datetime``; None for any other text (then
    :func:`parse_takeout_date` reads it, or says why not). Equal to
    ``(parse_takeout_date(text) - 1970-01-01 UTC) // 1 µs`` wherever it is not None.

    Indexing a space sorts every message by date; the day and clock halves repeat across
    messages, so each is parsed once (bounded caches).
    """
    if type(text) is not str:
        return None
    at = text.find(" at ")
    if at < 0:
        return None
    day_text, clock_text = text[:at], text[at + 4 :]
    day = _day(day_text)
    if day is None:
        return None
    clock = _clock(clock_text)
    if clock is None:
        return None
    return (day * 86_400 + clock) * 1_000_000


def format_takeout_date(moment: datetime) -> str:
    """``moment`` in UTC as Takeout writes it: ``Monday, January 8, 2024 at 10:15:32 AM UTC``."""
    moment = moment.astimezone(UTC)
    hour = moment.hour % 12 or 12
    return (
        f"{moment:%A}, {moment:%B} {moment.day}, {moment.year} at "
        f"{hour}:{moment:%M:%S} {'AM' if moment.hour < 12 else 'PM'} UTC"
    )
