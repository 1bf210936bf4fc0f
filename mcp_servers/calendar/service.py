"""Calendar operations behind the tools: list, read, create, update, delete.

Writes hold the foundation's per-file lock, re-read the file under it, splice only the
VEVENT blocks concerned (everything else stays byte for byte) and replace the file
atomically. New events go to the user's own calendar file
``<apps_data>/calendar/<user_email>.ics`` (created when absent).
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core.context import ServerContext
from mcp_servers._core.errors import ToolError
from mcp_servers._core.paths import validate_id
from mcp_servers.calendar import events as ev
from mcp_servers.calendar import splice
from mcp_servers.calendar.index import (
    CalendarIndex,
    Record,
    Snapshot,
)
from mcp_servers.calendar.models import Attendee, EventTime, Reminders
from mcp_servers.calendar.recurrence import Series, occurrences
from mcp_servers.calendar.times import (
    When,
    compact_utc,
    instant,
    now_utc,
    parse_bound,
    to_ical_value,
    when_view,
    zone,
)

icalendar = lazy_module("icalendar")

if TYPE_CHECKING:
    from icalendar import Event


#: Range listing without ``time_max`` expands recurring events this far past ``time_min``.
OPEN_RANGE = timedelta(days=366)
#: ``list_events``' page size when none is given: the events :meth:`CalendarService.warm` reads.
DEFAULT_PAGE = 50


class CalendarService:
    """The calendar of one world (thread-safe; state is the index cache)."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.root = context.app_dir("calendar")
        self.default_tz: tzinfo = zone(context.option("time_zone", "UTC"), argument="option time_zone")
        self.index = CalendarIndex(self.root, context.apps_data_root, self.default_tz)

    def warm(self) -> None:
        """Index every calendar file now, and read the events of the listing an agent asks for
        first (``list_events`` without arguments: the first page by start time), which the
        index leaves unparsed until shown (≈ 1 ms of icalendar each). Run in the background
        after a populate; other pages and ranges are parsed when first shown."""
        snapshot = self.index.snapshot()
        for record in snapshot.events[:DEFAULT_PAGE]:
            _view(record)

    # ---- reading ---------------------------------------------------------------------

    def list_events(
        self,
        *,
        limit: int,
        offset: int,
        time_min: str | None = None,
        time_max: str | None = None,
        query: str | None = None,
    ) -> dict[str, Any]:
        snapshot = self.index.snapshot()
        low = parse_bound(time_min, argument="time_min", default_tz=self.default_tz)
        high = parse_bound(time_max, argument="time_max", default_tz=self.default_tz)
        if low and high and high <= low:
            raise ToolError(
                ErrorCode.invalid_argument, "time_max must be after time_min", argument="time_max"
            )
        # Items are records (their view is built only when shown) or occurrence views.
        in_range = low is not None or high is not None
        items = self._in_range(snapshot, low, high) if in_range else list(snapshot.events)
        if query and query.strip():
            needle = query.strip().lower()
            items = [item for item in items if needle in _haystack(_view(item))]
        page = [_view(item) for item in items[offset : offset + limit]]
        result: dict[str, Any] = {
            "events": page,
            "total": len(items),
            "offset": offset,
            "limit": limit,
            "has_more": offset + len(page) < len(items),
        }
        if snapshot.problems:
            result["problems"] = snapshot.problems
        return result

    def _in_range(
        self, snapshot: Snapshot, low: datetime | None, high: datetime | None
    ) -> list[Record | dict[str, Any]]:
        window_low = low or datetime(1900, 1, 1, tzinfo=UTC)
        window_high = high or (low + OPEN_RANGE if low else datetime(2200, 1, 1, tzinfo=UTC))
        found: list[tuple[datetime, str, Record | dict[str, Any]]] = []
        for record in snapshot.events:
            if record.series is None:
                if (low is None or record.ends > low) and (high is None or record.begins < high):
                    found.append((record.begins, record.uid, record))
                continue
            found.extend(
                self._instances(
                    record, record.series, snapshot.by_uid.get(record.uid, []), window_low, window_high
                )
            )
        found.sort(key=lambda item: (item[0], item[1]))
        return [item for _, _, item in found]

    def _instances(
        self, master: Record, series: Series, records: list[Record], low: datetime, high: datetime
    ) -> list[tuple[datetime, str, dict[str, Any]]]:
        overrides = {r.recurrence_id: r for r in records if r.recurrence_id is not None}
        out = []
        try:
            starts = occurrences(series, low, high, self.default_tz)
        except (ValueError, TypeError) as exc:
            self.index.report(
                f"calendar file {master.file}: event {master.uid}: recurrence unreadable: {exc}"
            )
            starts = [master.start]
        for start in starts:
            begins = instant(start, self.default_tz)
            override = overrides.pop(begins, None)
            if override is not None:
                if override.view.get("status") != "cancelled":
                    out.append((override.begins, override.uid, self._override_view(master, begins, override)))
                continue
            out.append((begins, master.uid, self._occurrence_view(master, series, start)))
        for original, override in overrides.items():  # moved into the window from elsewhere
            if override.ends > low and override.begins < high and override.view.get("status") != "cancelled":
                out.append((override.begins, override.uid, self._override_view(master, original, override)))
        return out

    def _override_view(self, master: Record, original: datetime, override: Record) -> dict[str, Any]:
        """An overridden occurrence of ``master`` (originally at ``original``, aware UTC)."""
        view = {key: value for key, value in override.view.items() if key != "recurrence"}
        suffix = compact_utc(
            original if isinstance(master.start, datetime) else original.astimezone(self.default_tz).date()
        )
        return self._instance_view(master, view, suffix)

    def _occurrence_view(self, master: Record, series: Series, start: When) -> dict[str, Any]:
        """The occurrence of ``master`` that starts at ``start``, as the series describes it."""
        view = {key: value for key, value in master.view.items() if key != "recurrence"}
        view["start"] = when_view(start, self.default_tz)
        view["end"] = when_view(start + series.duration, self.default_tz)
        view["originalStartTime"] = view["start"]
        return self._instance_view(master, view, compact_utc(start))

    def _instance_view(self, master: Record, view: dict[str, Any], suffix: str) -> dict[str, Any]:
        """One occurrence of ``master`` (Google's instance shape: ``<uid>_<start>`` ids)."""
        view["id"] = f"{master.uid}_{suffix}"
        view["recurringEventId"] = master.uid
        return view

    def read_event(self, event_id: str) -> dict[str, Any]:
        snapshot = self.index.snapshot()
        records = snapshot.by_uid.get(event_id)
        if records:
            view = dict(records[0].view)
            overrides = [r.view for r in records[1:] if r.recurrence_id is not None]
            if overrides:
                view["overrides"] = overrides
            return view
        master_id, _, suffix = event_id.rpartition("_")
        master = snapshot.by_uid.get(master_id)
        if master and master[0].series is not None and suffix:
            for item in self._in_range(snapshot, *_suffix_window(suffix)):
                if _view(item)["id"] == event_id:
                    return _view(item)
        raise ToolError(
            ErrorCode.not_found, f"event_id: no event with id {event_id[:100]!r}", argument="event_id"
        )

    # ---- writing ---------------------------------------------------------------------

    def user_file(self) -> Path:
        """The file new events go to (see the module docstring)."""
        email = self.context.user_email
        if email:
            validate_id(email, argument="option user_email")
            return self.root / f"{email}.ics"
        name = self.context.option("calendar_file", "calendar.ics")
        validate_id(name, argument="option calendar_file")
        return self.root / name

    def create_event(
        self,
        *,
        summary: str,
        start: EventTime,
        end: EventTime,
        description: str | None,
        location: str | None,
        attendees: list[Attendee] | None,
        color_id: str | None,
        reminders: Reminders | None,
        recurrence: list[str] | None,
    ) -> dict[str, Any]:
        begin_value = self._when(start, "start")
        end_value = self._when(end, "end")
        ev.check_order(begin_value, end_value, self.default_tz)
        event = icalendar.Event()
        event.add("UID", f"{uuid.uuid4()}@atoll")
        stamp = now_utc()
        for name in ("DTSTAMP", "CREATED", "LAST-MODIFIED"):
            event.add(name, stamp)
        event.add("SEQUENCE", 0)
        event.add("STATUS", "CONFIRMED")
        ev.set_text(event, "SUMMARY", summary)
        ev.set_when(event, "DTSTART", begin_value)
        ev.set_when(event, "DTEND", end_value)
        ev.set_text(event, "DESCRIPTION", description or None)
        ev.set_text(event, "LOCATION", location or None)
        if self.context.user_email:
            event.add("ORGANIZER", ev.person_address(self.context.user_email, self.context.user_name))
        if attendees:
            ev.set_attendees(event, attendees)
        ev.set_text(event, ev.COLOR_PROPERTY, color_id or None)
        if recurrence:
            ev.set_recurrence(event, recurrence)
        if reminders is not None:
            ev.set_reminders(event, reminders, summary=summary, user_email=self.context.user_email)
        path = self.user_file()
        return splice.insert_event(self.index, path, event)

    def update_event(self, event_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        record = self._master(event_id)
        path = self.root / record.file

        def change(event: Event) -> None:
            begin_value = (
                self._when(changes["start"], "start") if changes.get("start") else event.decoded("DTSTART")
            )
            if changes.get("end"):
                end_value = self._when(changes["end"], "end")
            elif changes.get("start"):  # moving the start keeps the duration
                old_start, old_end = ev.start_end(event)
                length = ev.span(old_start, old_end)
                if length is not None and isinstance(old_start, datetime) == isinstance(
                    begin_value, datetime
                ):
                    end_value = begin_value + length
                else:  # timed <-> all-day: a day, or an hour
                    end_value = begin_value + (
                        timedelta(hours=1) if isinstance(begin_value, datetime) else timedelta(days=1)
                    )
            else:
                end_value = ev.start_end(event)[1]
            ev.check_order(begin_value, end_value, self.default_tz)
            if changes.get("start"):
                ev.set_when(event, "DTSTART", begin_value)
            if changes.get("start") or changes.get("end"):
                event.pop("DURATION", None)
                ev.set_when(event, "DTEND", end_value)
            for key, name in (
                ("summary", "SUMMARY"),
                ("description", "DESCRIPTION"),
                ("location", "LOCATION"),
            ):
                ev.set_text(event, name, changes.get(key))
            ev.set_text(event, ev.COLOR_PROPERTY, changes.get("color_id"))
            if changes.get("attendees") is not None:
                ev.set_attendees(event, changes["attendees"])
            if changes.get("recurrence") is not None:
                ev.set_recurrence(event, changes["recurrence"])
            if changes.get("reminders") is not None:
                summary = str(event.get("SUMMARY", ""))
                ev.set_reminders(
                    event, changes["reminders"], summary=summary, user_email=self.context.user_email
                )
            if changes.get("status"):
                ev.set_text(event, "STATUS", changes["status"].upper())
            sequence = int(event.get("SEQUENCE", 0) or 0) + 1
            event.pop("SEQUENCE", None)
            event.add("SEQUENCE", sequence)
            for name in ("DTSTAMP", "LAST-MODIFIED"):
                event.pop(name, None)
                event.add(name, now_utc())

        return splice.rewrite_event(self.index, path, event_id, change)

    def delete_event(self, event_id: str) -> dict[str, Any]:
        if event_id not in self.index.snapshot().by_uid and "_" in event_id:
            return self._delete_occurrence(event_id)
        record = self._master(event_id)
        splice.rewrite_event(self.index, self.root / record.file, event_id, None)
        return {"deleted": True, "id": event_id, "summary": record.view.get("summary", "")}

    def _delete_occurrence(self, occurrence_id: str) -> dict[str, Any]:
        """Drop one occurrence of a series: an EXDATE on the series (and its override, if any)."""
        view = self.read_event(occurrence_id)  # not_found unless it is a real occurrence
        master = self._master(view["recurringEventId"])
        original = view["originalStartTime"]
        if not isinstance(master.start, datetime):
            value: Any = date.fromisoformat(original["date"])
        elif master.start.tzinfo is not None:  # EXDATE in the series' own zone
            value = datetime.fromisoformat(original["dateTime"]).astimezone(master.start.tzinfo)
        else:  # a floating series: floating wall time
            value = (
                datetime.fromisoformat(original["dateTime"]).astimezone(self.default_tz).replace(tzinfo=None)
            )

        def change(event: Event) -> None:
            event.add("EXDATE", value)
            event.pop("LAST-MODIFIED", None)
            event.add("LAST-MODIFIED", now_utc())

        splice.rewrite_event(
            self.index,
            self.root / master.file,
            master.uid,
            change,
            drop_override=instant(value, self.default_tz),
        )
        return {
            "deleted": True,
            "id": occurrence_id,
            "recurringEventId": master.uid,
            "summary": view.get("summary", ""),
        }

    # ---- helpers ---------------------------------------------------------------------

    def _when(self, value: EventTime, argument: str) -> Any:
        return to_ical_value(
            value.dateTime, value.date, value.timeZone, argument=argument, default_tz=self.default_tz
        )

    def _master(self, event_id: str) -> Record:
        records = self.index.snapshot().by_uid.get(event_id)
        if not records:
            master_id = event_id.rpartition("_")[0]
            if master_id in self.index.snapshot().by_uid:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"event_id: {event_id[:100]!r} is one occurrence of recurring event {master_id!r}; "
                    "update the series (delete_event removes a single occurrence)",
                    argument="event_id",
                )
            raise ToolError(
                ErrorCode.not_found, f"event_id: no event with id {event_id[:100]!r}", argument="event_id"
            )
        return records[0]


def _view(item: Record | dict[str, Any]) -> dict[str, Any]:
    return item.view if isinstance(item, Record) else item


def _haystack(view: dict[str, Any]) -> str:
    parts = [view.get("summary", ""), view.get("description", ""), view.get("location", "")]
    parts += [a.get("email", "") + " " + a.get("displayName", "") for a in view.get("attendees", [])]
    return " ".join(parts).lower()


def _suffix_window(suffix: str) -> tuple[datetime, datetime]:
    """A small window around the start encoded in an instance id suffix."""
    try:
        if "T" in suffix:
            moment = datetime.strptime(suffix, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        else:
            moment = datetime.strptime(suffix, "%Y%m%d").replace(tzinfo=UTC)
    except ValueError:
        raise ToolError(
            ErrorCode.not_found, f"event_id: no event with id ending {suffix[:40]!r}", argument="event_id"
        ) from None
    return moment - timedelta(days=2), moment + timedelta(days=2)
