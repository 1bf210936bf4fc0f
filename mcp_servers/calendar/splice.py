"""Writing .ics files by splicing VEVENT blocks (see :mod:`atoll.formats.ics`).

Every write holds the foundation's per-file lock, re-reads the file under it, changes only
the blocks concerned, replaces the file atomically and hands the updated parsed entry to the
index's cache (so our own writes never cost a re-parse of the whole file).
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.ics import IcsLayout, IcsSyntaxError, read_text, split_blocks, with_newline
from mcp_servers._core.beneath import OutsideRoot
from mcp_servers._core.errors import ToolError
from mcp_servers._core.store import FileStamp, file_lock
from mcp_servers.calendar.index import TZID_LINE, CalendarIndex, ParsedFile, Record, parse_record
from mcp_servers.calendar.times import instant

icalendar = lazy_module("icalendar")

if TYPE_CHECKING:
    from icalendar import Event


PRODID = "-//atoll//calendar server//EN"
_FOLD = re.compile(r"\r?\n[ \t]")


def insert_event(index: CalendarIndex, path: Path, event: Event) -> dict[str, Any]:
    """Add ``event`` to the calendar file ``path`` (created when absent); returns its view.
    Raises ToolError ``bad_data`` when the file (or a folder on its way) links out of the
    app data: every read and write goes beneath the app-data root's descriptor."""
    try:
        return _insert_event(index, path, event)
    except OutsideRoot:
        raise ToolError(
            ErrorCode.bad_data, f"calendar file {path.name} links outside the app data; not changing it"
        ) from None


def _insert_event(index: CalendarIndex, path: Path, event: Event) -> dict[str, Any]:
    with file_lock(path):
        before = index.data.stamp(path)
        if before is None:
            calendar = icalendar.Calendar()
            calendar.add("PRODID", PRODID)
            calendar.add("VERSION", "2.0")
            calendar.add("CALSCALE", "GREGORIAN")
            calendar.add_component(event)
            calendar.add_missing_timezones()
            data = calendar.to_ical().decode("utf-8")
        else:
            source, layout = _read_layout(index, path, path.name)
            extra, _ = _zone_blocks(event, _file_zones(source, layout))
            addition = with_newline(extra + event.to_ical().decode("utf-8"), layout.newline)
            data = source[: layout.insert_at] + addition + source[layout.insert_at :]
        index.data.write_atomic(path, data.encode("utf-8"))
        rel = path.relative_to(index.root).as_posix()
        record = parse_record(event.to_ical().decode("utf-8"), rel=rel, default_tz=index.default_tz)
        known = _cached(index, path, before) if before is not None else ParsedFile()
        if known is not None:
            zones = known.tzids | _zone_blocks(event, set())[1]
            index.files.put(path, ParsedFile(known.records + [record], zones, known.problems))
        else:
            index.files.invalidate(path)
        return record.view


def _read_layout(index: CalendarIndex, path: Path, shown: str) -> tuple[str, IcsLayout]:
    """The text of the calendar file ``path`` and its blocks; ToolError ``bad_data`` (naming
    it as ``shown``) when it cannot be split, so an unreadable file is never rewritten."""
    try:
        source = read_text(index.data.read_bytes(path))
    except OutsideRoot:
        raise ToolError(
            ErrorCode.bad_data, f"calendar file {shown} links outside the app data; not changing it"
        ) from None
    try:
        layout = split_blocks(source)
    except IcsSyntaxError as exc:
        raise ToolError(
            ErrorCode.bad_data, f"calendar file {shown} is unreadable ({exc}); not changing it"
        ) from None
    return source, layout


def _file_zones(source: str, layout: IcsLayout) -> set[str]:
    """TZIDs of the VTIMEZONEs a file already has."""
    zones = set()
    for block in layout.blocks:
        if block.name == "VTIMEZONE":
            match = TZID_LINE.search(block.text(source))
            if match:
                zones.add(match.group(1).strip())
    return zones


def _zone_blocks(event: Event, have: set[str]) -> tuple[str, frozenset[str]]:
    """VTIMEZONE text for the zones ``event`` uses that are not in ``have``, and those zones."""
    probe = icalendar.Calendar()
    probe.add_component(event)
    probe.add_missing_timezones()
    zones = [z for z in probe.walk("VTIMEZONE") if str(z.get("TZID")) not in have]
    return "".join(z.to_ical().decode("utf-8") for z in zones), frozenset(str(z.get("TZID")) for z in zones)


def _cached(index: CalendarIndex, path: Path, stamp: FileStamp | None) -> ParsedFile | None:
    entry = index.files.peek(path)
    return entry[1] if entry is not None and entry[0] == stamp else None


def rewrite_event(
    index: CalendarIndex, path: Path, event_id: str, change: Any, *, drop_override: datetime | None = None
) -> dict[str, Any]:
    """Apply ``change`` to the series/event ``event_id`` in ``path`` (None deletes it with its
    overrides); ``drop_override`` (a UTC instant) also removes the override of that occurrence."""
    rel = path.relative_to(index.root).as_posix()
    with file_lock(path):
        before = index.data.stamp(path)
        if before is None:
            raise ToolError(
                ErrorCode.not_found,
                f"event_id: the file of event {event_id[:100]!r} is gone",
                argument="event_id",
            )
        source, layout = _read_layout(index, path, rel)
        have = _file_zones(source, layout)
        extra = ""  # VTIMEZONEs the changed event now needs, added before END:VCALENDAR
        pieces: list[str] = []
        cursor = 0
        result: dict[str, Any] = {}
        new_records: list[Record] = []
        for block in layout.blocks:
            if block.name != "VEVENT":
                continue
            text = block.text(source)
            if event_id not in _FOLD.sub("", text):  # cheap pre-filter before parsing
                continue
            try:
                event = icalendar.Event.from_ical(text)
            except Exception:  # noqa: BLE001 - unreadable blocks are not ours to touch
                continue
            if str(event.get("UID", "")) != event_id:
                continue
            pieces.append(source[cursor : block.start])
            cursor = block.end
            if change is None or "RECURRENCE-ID" in event:
                if change is None:
                    continue
                if drop_override is not None and (
                    instant(event.decoded("RECURRENCE-ID"), index.default_tz) == drop_override
                ):
                    continue
                pieces.append(text)  # overrides keep their own values
                new_records.append(parse_record(text, rel=rel, default_tz=index.default_tz))
                continue
            change(event)
            zones_text, added = _zone_blocks(event, have)
            have |= added
            extra += zones_text
            new_text = event.to_ical().decode("utf-8")
            pieces.append(with_newline(new_text, layout.newline))
            record = parse_record(new_text, rel=rel, default_tz=index.default_tz)
            new_records.append(record)
            result = record.view
        if cursor == 0:
            raise ToolError(
                ErrorCode.not_found, f"event_id: no event with id {event_id[:100]!r}", argument="event_id"
            )
        tail = source[cursor:]
        split = max(0, layout.insert_at - cursor)
        pieces.append(tail[:split] + with_newline(extra, layout.newline) + tail[split:])
        index.data.write_atomic(path, "".join(pieces).encode("utf-8"))
        known = _cached(index, path, before)
        if known is not None:
            kept = [r for r in known.records if r.uid != event_id]
            index.files.put(path, replace(known, records=kept + new_records))
        else:
            index.files.invalidate(path)
        return result
