"""Reading calendar files into an index of events, cached per file version.

Each .ics under ``<apps_data>/calendar`` is split into blocks and every VEVENT parsed on
its own, so one broken event (or one broken file) is reported and skipped while all the
others are served. Parsed files are cached by the foundation's :class:`FileCache`
(``mtime``/size/inode), and the merged, sorted view of all files is rebuilt only when one
of them changed.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from atoll._lazy import lazy_module
from atoll.content_cache import ContentCache
from atoll.formats.ics import IcsSyntaxError, read_text, split_blocks
from mcp_servers._core.app_data import AppData
from mcp_servers._core.problems import ProblemLog
from mcp_servers._core.store import FileCache, FileStamp
from mcp_servers.calendar.events import event_view, start_end
from mcp_servers.calendar.recurrence import Series, series_of
from mcp_servers.calendar.scan import scan_block
from mcp_servers.calendar.times import When, instant, when_view

_icalendar_timezone = lazy_module("icalendar.timezone")
icalendar = lazy_module("icalendar")

logger = logging.getLogger("mcp_servers.calendar")

TZID_LINE = re.compile(r"^TZID[^:\r\n]*:([^\r\n]+)", re.MULTILINE | re.IGNORECASE)


@dataclass(eq=False)
class Record:
    """One VEVENT as indexed: what sorting, filtering and expansion need, and its view.

    Plain events found by the quick scan keep their block text and build ``view`` on first
    use (cached here, so once per file version); others are parsed fully up front.
    """

    uid: str
    file: str  # path relative to the calendar folder, e.g. "work/team.ics"
    start: When
    end: When
    begins: datetime  # aware UTC
    ends: datetime  # aware UTC
    series: Series | None = None
    recurrence_id: datetime | None = None  # aware UTC; set on an override of one occurrence
    cached_view: dict[str, Any] | None = None
    block: str | None = None
    default_tz: tzinfo = UTC
    problem: str | None = None

    @property
    def view(self) -> dict[str, Any]:
        if self.cached_view is None:
            try:
                self.cached_view = event_view(
                    icalendar.Event.from_ical(self.block or ""),
                    calendar_file=self.file,
                    default_tz=self.default_tz,
                )
            except Exception as exc:  # noqa: BLE001 - shown with what the scan read, and reported
                self.problem = f"calendar file {self.file}: event {self.uid!r} is partly unreadable: {exc}"
                self.cached_view = {
                    "id": self.uid,
                    "summary": "",
                    "start": when_view(self.start, self.default_tz),
                    "end": when_view(self.end, self.default_tz),
                    "calendarFile": self.file,
                    "problem": self.problem,
                }
                logger.warning("%s", self.problem)
        return self.cached_view


@dataclass
class ParsedFile:
    records: list[Record] = field(default_factory=list)
    tzids: frozenset[str] = frozenset()
    problems: list[str] = field(default_factory=list)


@dataclass
class Snapshot:
    """All calendar files merged: what the tools read."""

    events: list[Record]  # series masters and single events (no overrides), by start then id
    by_uid: dict[str, list[Record]]  # every record of a UID, master first
    problems: list[str]


def _register_custom_zone(block: str) -> None:
    """Make a non-IANA VTIMEZONE (e.g. Outlook's 'Eastern Standard Time') resolvable."""
    match = TZID_LINE.search(block)
    if not match:
        return
    try:
        _icalendar_timezone.tzp.cache_timezone_component(icalendar.Timezone.from_ical(block))
    except Exception:  # noqa: BLE001 - an unreadable zone leaves its times floating
        logger.debug("cannot read VTIMEZONE %s", match.group(1))


def parse_record(block: str, *, rel: str, default_tz: tzinfo) -> Record:
    """Parse one VEVENT block. Raises ValueError (or icalendar's errors) when unreadable."""
    event = icalendar.Event.from_ical(block)
    start, end = start_end(event)
    view = event_view(event, calendar_file=rel, default_tz=default_tz)
    recurrence_id = instant(event.decoded("RECURRENCE-ID"), default_tz) if "RECURRENCE-ID" in event else None
    return Record(
        uid=view["id"],
        file=rel,
        cached_view=view,
        start=start,
        end=end,
        begins=instant(start, default_tz),
        ends=instant(end, default_tz),
        series=None if recurrence_id else series_of(event, start, end),
        recurrence_id=recurrence_id,
    )


#: Parsed calendar files by (content sha256, path in the calendar folder, default zone), shared
#: by every world of the process: each trial's world is a new copy of its seed, whose
#: calendars would otherwise be parsed again (with the first page of views, see
#: CalendarService.warm) for every trial. A ParsedFile is never changed once built (a write
#: makes a new one, splice.py); its records' views are filled in lazily, the same for every
#: holder.
_PARSED: ContentCache[ParsedFile] = ContentCache(max_entries=64)


def load_file(path: Path, *, data: AppData, root: Path, default_tz: tzinfo) -> ParsedFile:
    """Parse one .ics file (read beneath the app-data root's descriptor); problems are
    collected, never raised. A content already parsed in this process is not parsed again."""
    rel = path.relative_to(root).as_posix()
    try:
        raw = data.read_bytes(path)
    except OSError as exc:
        return ParsedFile(problems=[f"calendar file {rel} is unreadable: {exc}"])
    return _PARSED.get(raw, (rel, repr(default_tz)), lambda: _parse_file(raw, rel, default_tz))


def _parse_file(raw: bytes, rel: str, default_tz: tzinfo) -> ParsedFile:
    parsed = ParsedFile()
    try:
        source = read_text(raw)
        layout = split_blocks(source)
    except IcsSyntaxError as exc:
        parsed.problems.append(f"calendar file {rel} is unreadable: {exc}")
        return parsed
    tzids = set()
    for block in layout.blocks:
        if block.name == "VTIMEZONE":
            text = block.text(source)
            match = TZID_LINE.search(text)
            if match:
                tzids.add(match.group(1).strip())
                _register_custom_zone(text)
    parsed.tzids = frozenset(tzids)
    for block in layout.blocks:
        if block.name != "VEVENT":
            continue
        text = block.text(source)
        scanned = scan_block(text)
        if scanned is not None:
            parsed.records.append(
                Record(
                    uid=scanned.uid,
                    file=rel,
                    start=scanned.start,
                    end=scanned.end,
                    begins=instant(scanned.start, default_tz),
                    ends=instant(scanned.end, default_tz),
                    block=text,
                    default_tz=default_tz,
                )
            )
            continue
        try:
            parsed.records.append(parse_record(text, rel=rel, default_tz=default_tz))
        except Exception as exc:  # noqa: BLE001 - any unreadable event is skipped and reported
            line = source.count("\n", 0, block.start) + 1
            parsed.problems.append(f"calendar file {rel}: event at line {line} skipped: {exc}")
    return parsed


class CalendarIndex:
    """The events of every .ics under ``root``, cached and kept current."""

    def __init__(self, root: Path, apps_data_root: Path, default_tz: tzinfo) -> None:
        self.root = root
        self.default_tz = default_tz
        self.data = AppData(apps_data_root, root.name)  # root is <apps_data_root>/calendar
        self.files = FileCache(
            lambda path: load_file(path, data=self.data, root=self.root, default_tz=self.default_tz),
            stamp=self.data.stamp,
        )
        self._lock = threading.Lock()
        self._merged: tuple[tuple[Any, ...], Snapshot] | None = None
        self._problems = ProblemLog(logger)

    def paths(self) -> list[tuple[Path, FileStamp]]:
        """Every .ics file under the root, sorted, with its stamp; walked beneath the
        app-data root's descriptor, so links leading out of the app data are skipped."""
        return self.data.files(".ics", skip_hidden=True)

    def snapshot(self) -> Snapshot:
        """The merged index as the files are now (re-parsing only changed files)."""
        paths = self.paths()
        key = tuple((str(p), stamp) for p, stamp in paths)
        with self._lock:
            if self._merged is not None and self._merged[0] == key:
                return self._merged[1]
        parsed: list[ParsedFile] = []
        for path, stamp in paths:
            try:
                parsed.append(self.files.get(path, stamp=stamp))
            except FileNotFoundError:  # removed since listing
                continue
        snapshot = self._merge(parsed)
        with self._lock:
            self._merged = (key, snapshot)
        return snapshot

    def _merge(self, parsed: list[ParsedFile]) -> Snapshot:
        by_uid: dict[str, list[Record]] = {}
        problems: list[str] = []
        masters: dict[str, Record] = {}
        for item in parsed:
            problems.extend(item.problems)
            for record in item.records:
                if record.recurrence_id is None:
                    if record.uid in masters:
                        first = masters[record.uid]
                        problems.append(
                            f"event id {record.uid!r} is in both {first.file} and {record.file}; using {first.file}"
                        )
                        continue
                    masters[record.uid] = record
                by_uid.setdefault(record.uid, []).append(record)
        for uid, records in by_uid.items():
            records.sort(key=lambda r: (r.recurrence_id is not None, r.recurrence_id or r.begins))
            if uid not in masters:  # only overrides present: list them as events of their own
                masters[uid] = records[0]
        events = sorted(masters.values(), key=lambda r: (r.begins, r.uid))
        for problem in problems:
            self.report(problem)
        return Snapshot(events=events, by_uid=by_uid, problems=problems)

    def contains(self, path: Path) -> bool:
        """Whether ``path`` exists and resolves inside the app data (by descriptor)."""
        return self.data.contains(path)

    def report(self, problem: str) -> None:
        """Log a data problem once per server (it is also returned with listings)."""
        self._problems.report(problem)
