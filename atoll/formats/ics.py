"""Split an .ics file into its top-level component blocks without parsing them, and read
its events.

The calendar server's tools and the grader read calendar files this way (then parse each
VEVENT block on its own), so one broken event hides no other from either of them;
:func:`read_events` gives the judge each event's properties as text, and :func:`address_email`
is how both sides read an ORGANIZER/ATTENDEE address.

Writes splice one VEVENT block in or out of the file text, so every other byte of the
file (other events, time zones, unknown components, the producer's formatting) stays
exactly as it was. Parsing is then needed only for the block being changed.

Lines that begin with a space or tab are folded continuations (RFC 5545 §3.1), so a
``BEGIN:``/``END:`` at the start of a line is always a real component boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from hashlib import sha256
from typing import TYPE_CHECKING, Any, cast

from atoll.errors import CodedError, ErrorCode

if TYPE_CHECKING:
    import icalendar

_BOUNDARY = re.compile(r"^(BEGIN|END):([A-Za-z0-9-]+)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)


class IcsSyntaxError(CodedError, ValueError):
    """The file is not an iCalendar stream (unbalanced or missing BEGIN/END lines)."""

    code = ErrorCode.ics_syntax


@dataclass(frozen=True)
class Block:
    """One component directly inside a VCALENDAR: its name and its text span."""

    name: str  # upper case: VEVENT, VTIMEZONE, VTODO, ...
    start: int  # offset of its BEGIN line
    end: int  # offset just after its END line (line break included)

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@dataclass(frozen=True)
class IcsLayout:
    """The blocks of a file and where new components may be inserted."""

    blocks: list[Block]
    insert_at: int  # offset of the last END:VCALENDAR line
    newline: str  # the file's line break ("\r\n" or "\n")


def split_blocks(source: str) -> IcsLayout:
    """The top-level blocks of every VCALENDAR in ``source``.

    Raises IcsSyntaxError when there is no VCALENDAR or BEGIN/END lines do not balance.
    """
    blocks: list[Block] = []
    stack: list[tuple[str, int]] = []
    insert_at = -1
    for match in _BOUNDARY.finditer(source):
        kind, name = match.group(1).upper(), match.group(2).upper()
        line_end = source.find("\n", match.end())
        line_end = len(source) if line_end < 0 else line_end + 1
        if kind == "BEGIN":
            if not stack and name != "VCALENDAR":
                raise IcsSyntaxError(f"line {_line_of(source, match.start())}: {name} outside a VCALENDAR")
            stack.append((name, match.start()))
            continue
        if not stack or stack[-1][0] != name:
            expected = stack[-1][0] if stack else "nothing"
            raise IcsSyntaxError(
                f"line {_line_of(source, match.start())}: END:{name} does not close {expected}"
            )
        _, begin = stack.pop()
        if len(stack) == 1:
            blocks.append(Block(name, begin, line_end))
        elif not stack:
            insert_at = match.start()
    if stack:
        raise IcsSyntaxError(
            f"{stack[-1][0]} opened on line {_line_of(source, stack[-1][1])} is never closed"
        )
    if insert_at < 0:
        raise IcsSyntaxError("no BEGIN:VCALENDAR ... END:VCALENDAR found")
    newline = "\r\n" if "\r\n" in source[:4096] else "\n"
    return IcsLayout(blocks=blocks, insert_at=insert_at, newline=newline)


def read_text(data: bytes) -> str:
    """The text of a calendar file's bytes."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:  # old exports in Latin-1 still carry readable events
        return data.decode("latin-1")


def with_newline(text: str, newline: str) -> str:
    """``text`` (as icalendar serialises it, CRLF) with the file's line breaks."""
    if newline == "\r\n":
        return text
    return text.replace("\r\n", newline)


#: The VEVENT properties the judge compares (lower-case names, as in ``Event.fields``).
EVENT_FIELDS = (
    "summary",
    "dtstart",
    "dtend",
    "location",
    "description",
    "status",
    "rrule",
    "attendee",
    "organizer",
)


@dataclass(frozen=True)
class Event:
    """One readable VEVENT of a file: its key and its properties as text."""

    key: str  # UID, + "#<RECURRENCE-ID>" for an override; "sha256:<block>" without a UID
    line: int  # line of its BEGIN:VEVENT
    fields: dict[str, Any]  # EVENT_FIELDS present: text (dates ISO 8601); "attendee" a sorted list


@dataclass
class EventsRead:
    events: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per skipped event


def address_email(address: Any) -> str:
    """The email of an ORGANIZER/ATTENDEE value (``mailto:`` dropped, in any case)."""
    email = str(address)
    return email[7:] if email.lower().startswith("mailto:") else email


def property_text(value: Any) -> Any:
    """A property value as text: dates and date-times ISO 8601, others as iCalendar writes
    them; a list (a repeated property) item by item."""
    if isinstance(value, list):
        return [property_text(item) for item in value]
    decoded = getattr(value, "dt", None)
    if isinstance(decoded, datetime | date):
        return decoded.isoformat()
    if hasattr(value, "to_ical"):
        raw = value.to_ical()
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return str(value)


def parse_event(block: str, zones: str = "") -> icalendar.Event:
    """One VEVENT block parsed with the file's VTIMEZONE blocks around it (its TZIDs refer to
    them). Raises icalendar's errors (ValueError and others) when unreadable."""
    import icalendar

    (event,) = icalendar.Calendar.from_ical(f"BEGIN:VCALENDAR\r\n{zones}{block}END:VCALENDAR\r\n").walk(
        "VEVENT"
    )
    return cast(icalendar.Event, event)  # walk("VEVENT") yields the VEVENTs


def read_events(data: bytes) -> EventsRead:
    """The VEVENTs of one .ics file, each parsed on its own (a broken one is skipped and named
    in ``problems``, the others kept). Raises IcsSyntaxError when the file is not an
    iCalendar stream at all."""
    source = read_text(data)
    layout = split_blocks(source)
    zones = "".join(block.text(source) for block in layout.blocks if block.name == "VTIMEZONE")
    read = EventsRead()
    for block in layout.blocks:
        if block.name != "VEVENT":
            continue
        text = block.text(source)
        line = _line_of(source, block.start)
        try:
            event = parse_event(text, zones)
            uid = str(event.get("UID") or "")
            recurrence = event.get("RECURRENCE-ID")
            key = uid + (f"#{property_text(recurrence)}" if recurrence is not None else "")
            fields = {
                name: property_text(event.get(name)) for name in EVENT_FIELDS if event.get(name) is not None
            }
        except Exception as exc:  # noqa: BLE001 - any unreadable event is skipped and reported
            read.problems.append(f"event at line {line} skipped: {exc}")
            continue
        attendees = event.get("ATTENDEE")
        listed = attendees if isinstance(attendees, list) else [] if attendees is None else [attendees]
        fields["attendee"] = sorted(address_email(attendee) for attendee in listed)
        if "organizer" in fields:
            fields["organizer"] = address_email(event.get("ORGANIZER"))
        read.events.append(Event(key or f"sha256:{sha256(text.encode()).hexdigest()}", line, fields))
    return read


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1
