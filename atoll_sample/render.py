"""Worlds kept as data (``atoll_sample/worlds/*.yaml``), rendered by the writers.

A files data file lists ``files``, each ``{path, kind, ...}``; the kind names its writer:

- ``text``: ``body`` through :meth:`WorldDraft.text` (stripped, one final newline);
- ``exact``: ``body`` written as it is (CSV extracts whose bytes a task may read);
- ``csv``: ``rows`` as comma-separated lines (quoted where needed, ``\n`` line ends);
- ``docx``: ``blocks`` (:mod:`atoll_sample.documents`), ``author``, ``title``;
- ``pptx``: ``slides`` (:mod:`atoll_sample.slides`), ``author``, ``title``;
- ``xlsx``: ``sheets``, each the fields of :class:`atoll_sample.sheets.Sheet`, ``creator``;
- ``pdf``: ``pages`` (:mod:`atoll_sample.pdfs`), ``title``, ``author``.

It may hold ``facts`` too (added to the draft's facts first; the world-building step's
``compute`` then derives its numbers from them, drawing from the draft's ``rng``). Every string of
a file is filled in from the facts as in a task data file (below), and a list item that is one
``{name}`` naming a list stands for its items (a table's computed rows after its header row, a
row's computed cells after its label). A file with ``each: name`` is written once for every
mapping of the list that fact holds, its keys filled in too (``path: "{path}"``).

An apps data file holds the user's mail, calendars and chat (:func:`render_apps`): ``facts``
(added to the draft's facts, for tasks), ``mail`` (:mod:`atoll_sample.mail` specs plus filler
threads), ``calendars`` (:mod:`atoll_sample.calendar` specs) and ``chat``
(:mod:`atoll_sample.chat` groups plus filler lines). A field that holds people names them as
:mod:`atoll_sample.people` does (``PRIYA``, or a list such as ``KEYSTONE_TEAM``); a moment is
``2024-02-27 16:42 America/Chicago`` (an unquoted ``2024-03-12`` is a day, for all-day events).
A value of the draft's facts is filled in by name as in a task data file: a string that is one
``{name}`` is that value itself, any other string is formatted (``{{`` for a brace).

Any string may name a field of a person of :mod:`atoll_sample.people` as ``{PRIYA.name}``, so
the cast is written once. Rendering is deterministic: the writers are, and filler draws from the
draft's seeded ``rng`` in the order the data lists it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from atoll.errors import AtollError, ErrorCode
from atoll_sample import people
from atoll_sample._tasks import fill
from atoll_sample._world import WorldDraft, filler_chat, filler_mail
from atoll_sample.calendar import write_calendar
from atoll_sample.chat import write_chat
from atoll_sample.documents import write_document
from atoll_sample.mail import write_mbox
from atoll_sample.pdfs import write_pdf
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck

WORLDS = Path(__file__).with_name("worlds")
_PERSON_FIELD = re.compile(r"\{([A-Z]+)\.(name|email|title|company)\}")
_MOMENT = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d) (\S+)")


def files_from_data(
    name: str, compute: Callable[[WorldDraft], None] | None = None
) -> Callable[[WorldDraft], None]:
    """The world-building step that renders ``worlds/<name>.yaml`` into a draft's filesystem,
    calling ``compute`` once the data's facts are in the draft's."""
    return _step(lambda draft, data_file: render_files(draft, data_file, compute), name, "files_from_data")


def apps_from_data(name: str) -> Callable[[WorldDraft], None]:
    """The world-building step that renders ``worlds/<name>.yaml`` into a draft's apps data."""
    return _step(render_apps, name, "apps_from_data")


def _step(render: Callable[[WorldDraft, Path], None], name: str, label: str) -> Callable[[WorldDraft], None]:
    def build(draft: WorldDraft) -> None:
        render(draft, WORLDS / f"{name}.yaml")

    build.__qualname__ = f"{label}({name!r})"
    return build


def render_files(
    draft: WorldDraft, data_file: Path, compute: Callable[[WorldDraft], None] | None = None
) -> None:
    """Add the facts ``data_file`` holds to ``draft``'s, call ``compute`` (if any), then write
    every file it lists into ``draft``. Raises AtollError ``bad_input`` naming a file of an
    unknown kind, an unknown person or a value with no fact."""
    data = _with_people(yaml.safe_load(data_file.read_text(encoding="utf-8")))
    draft.facts.update(data.get("facts", {}))
    if compute:
        compute(draft)
    for entry in data["files"]:
        kind = entry["kind"]
        if kind not in _WRITERS:
            raise AtollError(
                ErrorCode.bad_input, f"{data_file.name}: {entry['path']} has unknown kind {kind!r}"
            )
        try:
            items = draft.facts[entry["each"]] if "each" in entry else [{}]
            filled = [fill(entry, draft.facts | item, splice=True) for item in items]
        except KeyError as exc:
            raise AtollError(
                ErrorCode.bad_input, f"{data_file.name}: {entry['path']} uses {exc} with no value"
            ) from None
        for one in filled:
            _WRITERS[kind](draft, one)


def render_apps(draft: WorldDraft, data_file: Path) -> None:
    """Write the mailbox, calendars and chat export ``data_file`` holds into ``draft`` (in that
    order) and set the facts ``mail_count``, ``event_count`` and ``chat_count``. Raises
    AtollError ``bad_input`` naming an unknown person, a value with no fact or a bad moment."""
    data = _with_people(yaml.safe_load(data_file.read_text(encoding="utf-8")))
    draft.facts.update(data.pop("facts", {}))
    try:
        data = fill(data, draft.facts)
    except KeyError as exc:
        raise AtollError(ErrorCode.bad_input, f"{data_file.name}: uses {exc} with no value") from None
    _mail(draft, data["mail"])
    _calendars(draft, data["calendars"])
    _chat(draft, data["chat"])


def _mail(draft: WorldDraft, mail: dict[str, Any]) -> None:
    """Filler threads, then the listed messages, in date order; Message-IDs in the user's domain."""
    filler = mail["filler"]
    messages = filler_mail(
        draft,
        prefix=filler["prefix"],
        threads=[(thread["subject"], thread["bodies"]) for thread in filler["threads"]],
        people=_people(filler["people"]),
        start=_moment(filler["start"]),
        span_days=filler["span_days"],
    )
    for spec in mail["messages"]:
        message = spec | {
            "sender": _person(spec["sender"]),
            "to": _people(spec["to"]),
            "cc": _people(spec.get("cc", [])),
            "date": _moment(spec["date"]),
        }
        if "attachment" in spec:
            attached = spec["attachment"]
            message["attachment"] = (attached["name"], attached["content"].encode("utf-8"), attached["type"])
        messages.append(message)
    messages.sort(key=lambda m: m["date"])
    user_email = draft.user["email"]
    write_mbox(draft.apps(mail["path"]), messages, domain=user_email.partition("@")[2], user_email=user_email)
    draft.facts["mail_count"] = len(messages)


def _calendars(draft: WorldDraft, calendars: list[dict[str, Any]]) -> None:
    count = 0
    for calendar in calendars:
        events = []
        for spec in calendar["events"]:
            event = spec | {"start": _moment(spec["start"]), "end": _moment(spec["end"])}
            if "organizer" in spec:
                event["organizer"] = _person(spec["organizer"])
            if "attendees" in spec:
                event["attendees"] = _people(spec["attendees"])
            if "until" in spec.get("rrule", {}):
                event["rrule"] = spec["rrule"] | {"until": _moment(spec["rrule"]["until"])}
            events.append(event)
        write_calendar(draft.apps(calendar["path"]), events, name=calendar["name"])
        count += len(events)
    draft.facts["event_count"] = count


def _chat(draft: WorldDraft, chat: dict[str, Any]) -> None:
    """Each group: ``filler`` messages by its members from the chat's ``lines`` (``from_line``
    on, ``rotated``: then the lines before it), ``deleted`` (their indices), then the listed
    ``messages`` (a ``topic`` counts among those)."""
    lines, start = chat["lines"], _moment(chat["start"])
    groups = []
    for spec in chat["groups"]:
        members = _people(spec["members"])
        messages: list[dict[str, Any]] = []
        if "filler" in spec:
            first = spec["filler"].get("from_line", 0)
            chosen = lines[first:] + (lines[:first] if spec["filler"].get("rotated") else [])
            messages = filler_chat(draft, chosen, members, start, spec["filler"]["count"])
        for index in spec.get("deleted", []):
            messages[index]["deleted"] = True
        listed = len(messages)
        for item in spec.get("messages", []):
            message = item | {"author": _person(item["author"]), "at": _moment(item["at"])}
            if "topic" in item:
                message["topic"] = listed + item["topic"]
            messages.append(message)
        group = {"group_id": spec["group_id"], "members": members, "messages": messages}
        if "name" in spec:
            group["name"] = spec["name"]
        groups.append(group)
    write_chat(draft.apps(chat["path"]), groups, user=draft.user, user_id=chat["user_id"])
    draft.facts["chat_count"] = sum(len(group["messages"]) for group in groups)


def _moment(value: str | date) -> date | datetime:
    if type(value) is date:
        return value
    found = _MOMENT.fullmatch(str(value))
    try:
        if found:
            return datetime.strptime(found[1], "%Y-%m-%d %H:%M").replace(tzinfo=ZoneInfo(found[2]))
    except (ValueError, ZoneInfoNotFoundError):
        pass
    raise AtollError(ErrorCode.bad_input, f"{value!r} is neither a day nor 'YYYY-MM-DD HH:MM Zone'")


def _cast(name: str) -> Any:
    found = vars(people).get(name)
    if not isinstance(found, dict | list):
        raise AtollError(ErrorCode.bad_input, f"{name} is no person of atoll_sample/people.py")
    return found


def _person(name: str) -> dict[str, str]:
    found = _cast(name)
    if not isinstance(found, dict):
        raise AtollError(ErrorCode.bad_input, f"{name} is a list of people, where one person goes")
    return found


def _people(names: str | list[str]) -> list[dict[str, str]]:
    """The people ``names`` names, a list such as ``KEYSTONE_TEAM`` standing for its members."""
    found = [_cast(name) for name in ([names] if isinstance(names, str) else names)]
    return [one for item in found for one in (item if isinstance(item, list) else [item])]


def _person_field(found: re.Match[str]) -> str:
    try:
        return _person(found[1])[found[2]]
    except AtollError as exc:
        raise AtollError(ErrorCode.bad_input, f"{found[0]}: {exc.message}") from None


def _with_people(value: Any) -> Any:
    if isinstance(value, str):
        return _PERSON_FIELD.sub(_person_field, value)
    if isinstance(value, list):
        return [_with_people(item) for item in value]
    if isinstance(value, dict):
        return {key: _with_people(item) for key, item in value.items()}
    return value


def _text(draft: WorldDraft, entry: dict[str, Any]) -> None:
    draft.text(entry["path"], entry["body"])


def _exact(draft: WorldDraft, entry: dict[str, Any]) -> None:
    draft.fs(entry["path"]).write_text(entry["body"], encoding="utf-8")


def _csv(draft: WorldDraft, entry: dict[str, Any]) -> None:
    draft.fs(entry["path"]).write_text(csv_text(entry["rows"]), encoding="utf-8")


def csv_text(rows: list[list[Any]]) -> str:
    """``rows`` as a CSV file's text (``\n`` line ends)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _docx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_document(draft.fs(entry["path"]), entry["blocks"], **options)


def _pptx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_deck(draft.fs(entry["path"]), entry["slides"], **options)


def _xlsx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("creator",) if key in entry}
    write_workbook(draft.fs(entry["path"]), [Sheet(**sheet) for sheet in entry["sheets"]], **options)


def _pdf(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_pdf(draft.fs(entry["path"]), entry["pages"], **options)


_WRITERS: dict[str, Callable[[WorldDraft, dict[str, Any]], None]] = {
    "text": _text,
    "exact": _exact,
    "csv": _csv,
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "pdf": _pdf,
}
