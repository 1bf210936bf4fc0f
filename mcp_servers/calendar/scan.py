"""A quick look at a VEVENT block: UID and times without a full iCalendar parse.

Cold listing of a large calendar is dominated by icalendar parsing every event. The index
only needs each event's id and start/end instants to sort and filter; the full view is
parsed when an event is actually shown (see ``Record.view``). This scan handles the common
shapes of DTSTART/DTEND (UTC, floating, all-day, IANA TZID) and gives up (returns None) on
anything else, which then takes the full parse: recurrence, overrides, DURATION, custom
time zones, escaped UIDs, unusual value types.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp_servers.calendar.times import When

_FULL_PARSE = ("RRULE", "RDATE", "EXRULE", "EXDATE", "RECURRENCE-ID", "DURATION")


@dataclass(frozen=True)
class Scanned:
    uid: str
    start: When
    end: When


@lru_cache(maxsize=512)
def _zone(tzid: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(tzid)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _value(params: str, text: str) -> When | None:
    """A DTSTART/DTEND value from its parameters (``;TZID=…``) and text, or None."""
    tzid = None
    is_date = False
    for param in params.split(";"):
        if not param:
            continue
        key, _, value = param.partition("=")
        key = key.upper()
        if key == "TZID":
            tzid = value.strip('"')
        elif key == "VALUE":
            if value.upper() == "DATE":
                is_date = True
            elif value.upper() != "DATE-TIME":
                return None
        else:
            return None
    text = text.strip()
    try:
        if len(text) == 8 and text.isdigit():
            return date(int(text[:4]), int(text[4:6]), int(text[6:8])) if tzid is None else None
        if is_date or len(text) not in (15, 16) or text[8] != "T":
            return None
        moment = datetime(
            int(text[:4]), int(text[4:6]), int(text[6:8]), int(text[9:11]), int(text[11:13]), int(text[13:15])
        )
    except ValueError:
        return None
    if len(text) == 16:
        return moment.replace(tzinfo=UTC) if text[15] in "Zz" and tzid is None else None
    if tzid is None:
        return moment  # floating
    zone = _zone(tzid)
    return moment.replace(tzinfo=zone) if zone is not None else None


def scan_block(block: str) -> Scanned | None:
    """UID, start and end of a plain VEVENT block, or None when a full parse is needed."""
    depth = 0
    found: dict[str, tuple[str, str]] = {}
    last = ""
    for line in block.replace("\r\n", "\n").split("\n"):
        if not line:
            continue
        if line[0] in " \t":  # folded continuation
            if last in ("UID", "DTSTART", "DTEND"):
                return None
            continue
        last = ""
        name_part, sep, value = line.partition(":")
        if not sep:
            continue
        name, _, params = name_part.partition(";")
        name = name.upper()
        if name == "BEGIN":
            depth += 1
            continue
        if name == "END":
            depth -= 1
            continue
        if depth != 1:
            continue  # inside a VALARM or another sub-component
        if name in _FULL_PARSE:
            return None
        if name in ("UID", "DTSTART", "DTEND"):
            if name in found:
                return None
            found[name] = (params, value)
            last = name
    if "UID" not in found or "DTSTART" not in found:
        return None
    uid = found["UID"][1].strip()
    if not uid or "\\" in uid or found["UID"][0]:
        return None
    start = _value(*found["DTSTART"])
    if start is None:
        return None
    if "DTEND" in found:
        end = _value(*found["DTEND"])
        if end is None or isinstance(end, datetime) != isinstance(start, datetime):
            return None
    else:
        end = start + timedelta(days=1) if not isinstance(start, datetime) else start
    return Scanned(uid, start, end)
