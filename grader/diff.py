"""Diff two snapshots by content hash into typed changes and judge-readable artifacts.

Files are compared by sha256, so an edit that keeps the size is still a modification.
Each changed document becomes one artifact (its extracted text, and for a modification the
sub-items that changed: sheets with their changed cells, slides, pages, lines); each mail
sent, event change and chat change becomes its own artifact.  Changes to what existed before
the agent ran (deleted or modified files, deleted or edited mails, updated or deleted events,
deleted or edited chat messages) are the ones a flood of new things must never hide: the change log lists them
first (grader/changelog.py), and evidence selection always shows them (grader/evidence.py).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from atoll.coworkers import CoworkerExchange
from atoll.grade import Changes, ChatChange, EventChange, FileChange, MailSent
from grader import appdata
from grader.budget import printable
from grader.changelog import ALTERS_EXISTING, ChangeLog, change_kind
from grader.extract import Extracted, ExtractOptions, Part, extension, extract
from grader.snapshot import FS_PREFIX, AnySnapshot, SnapshotEntry, virtual_path

MAX_CELL_CHANGES = 300
MAX_DIFF_LINES = 300


@dataclass
class Artifact:
    """One piece of evidence the judge may be shown.

    ``id`` is stable across runs (``file:/Reports/x.xlsx``, ``mail:<Message-ID>``,
    ``event:<uid>``, ``chat:<message id>``, ``final_answer``); ``error`` is set when the
    content could not be extracted.
    """

    id: str
    kind: str
    title: str
    text: str
    path: str | None = None
    file_type: str | None = None
    change: str | None = None
    error: str | None = None

    @property
    def alters_existing(self) -> bool:
        """Whether it shows a change to something that existed before (never left out)."""
        return (self.kind, self.change) in ALTERS_EXISTING

    @property
    def change_kind(self) -> str:
        """Its kind of change (``created file``): each kind has its own evidence budget."""
        return change_kind(self.kind, self.change)


@dataclass
class WorldDiff:
    """Everything the grader learns from a pair of snapshots."""

    before: AnySnapshot
    after: AnySnapshot
    changes: Changes
    artifacts: list[Artifact] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def change_log(self) -> ChangeLog:
        """A short, one-line-per-change summary of the diff (see :class:`ChangeLog`)."""
        return ChangeLog(self.changes)


def cell_changes(before: Part, after: Part) -> tuple[list[str], list[str]]:
    """The cells of a sheet that changed, in reading order, split in two: those whose value or
    formula changed (a literal edited, a formula written or rewritten, a cell added or
    cleared), and formula cells whose formula is the same on both sides, where only the
    computed value shown beside it differs (a writer that dropped or recomputed cached values
    changes every formula of the sheet so: they are counted, not listed)."""
    was, now = before.cells or {}, after.cells or {}
    old_formulas, new_formulas = before.formulas or {}, after.formulas or {}
    changed: list[str] = []
    same_formula: list[str] = []
    for coordinate in sorted(was.keys() | now.keys(), key=_cell_order):
        if was.get(coordinate) == now.get(coordinate):
            continue
        formula = old_formulas.get(coordinate)
        if formula is not None and formula == new_formulas.get(coordinate):
            same_formula.append(coordinate)
        else:
            changed.append(coordinate)
    return changed, same_formula


@dataclass
class LineChange:
    """One line (a paragraph, a slide's line, a text line) ``added``, ``removed`` or
    ``changed`` (``before`` → ``after``), compared without leading element identifiers."""

    change: str
    before: str | None
    after: str | None


def line_changes(before: str, after: str) -> list[LineChange]:
    """The lines of ``after`` that are new, gone or changed against ``before``: a replaced run
    of lines pairs up line by line, what is left over is added or removed."""
    old, new = _without_ids(before), _without_ids(after)
    found: list[LineChange] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        found += [LineChange("changed", old[i1 + k], new[j1 + k]) for k in range(pairs)]
        found += [LineChange("removed", line, None) for line in old[i1 + pairs : i2]]
        found += [LineChange("added", None, line) for line in new[j1 + pairs : j2]]
    return found


@dataclass
class FieldChange:
    """One field of a mail, event or chat message: ``before`` None when added, ``after`` None
    when removed."""

    field: str
    before: Any = None
    after: Any = None


@dataclass
class RecordChange:
    """A mail, calendar event or chat message ``added``, ``removed`` or ``changed``, field by
    field: ``fields`` holds every field it has when added or removed, and only those that
    differ when changed. ``action`` is the typed change's own word (``sent``, ``updated``,
    ``replied``, …), ``id`` the id of its evidence artifact."""

    kind: Literal["mail", "event", "chat"]
    change: Literal["added", "removed", "changed"]
    action: str
    id: str
    title: str
    fields: list[FieldChange] = field(default_factory=list)


MAIL_FIELDS = ("from", "to", "cc", "bcc", "subject", "body", "attachments")
EVENT_FIELDS = ("title", "start", "end", "attendees", "location")
CHAT_FIELDS = ("channel", "author", "text")
# iCalendar properties (atoll.formats.ics.EVENT_FIELDS) by the names a reader knows them by.
_EVENT_NAMES = {"summary": "title", "dtstart": "start", "dtend": "end", "attendee": "attendees"}
_MAIL_CHANGE = {"sent": "added", "deleted": "removed", "edited": "changed"}
_EVENT_CHANGE = {"created": "added", "deleted": "removed", "updated": "changed"}
_CHAT_CHANGE = {
    "posted": "added",
    "replied": "added",
    "deleted": "removed",
    "edited": "changed",
    "reacted": "changed",
}


def _present(value: Any) -> bool:
    return value not in (None, "", [], {})


def _whole(values: dict[str, Any], names: tuple[str, ...], side: str) -> list[FieldChange]:
    """Every field that has a value, on one side (``before`` for a removal, ``after`` for an addition)."""
    return [FieldChange(name, **{side: values[name]}) for name in names if _present(values.get(name))]


def _mail_fields(mail: MailSent) -> dict[str, Any]:
    return {
        "from": mail.from_,
        "to": mail.to,
        "cc": mail.cc,
        "bcc": mail.bcc,
        "subject": mail.subject,
        "body": mail.body,
        "attachments": mail.attachments,
    }


def record_changes(changes: Changes) -> list[RecordChange]:
    """The mails, calendar events and chat messages of ``changes`` added, removed and changed,
    field by field (mail: from, to, cc, bcc, subject, body, attachments; event: title, start,
    end, attendees, location and any other property that changed; chat: channel, author, text,
    and a reaction added). The one rule for these views: the viewer's world diff shows them."""
    found: list[RecordChange] = []
    edited_before = changes.mails_edited_before
    for action, mails in (
        ("sent", changes.mails_sent),
        ("deleted", changes.mails_deleted),
        ("edited", changes.mails_edited),
    ):
        for index, mail in enumerate(mails):
            ident = mail.message_id or f"#{index + 1}"
            now = _mail_fields(mail)
            if action == "edited":
                was = _mail_fields(edited_before[index]) if index < len(edited_before) else {}
                fields = [
                    FieldChange(name, was.get(name), now[name])
                    for name in MAIL_FIELDS
                    if was.get(name) != now[name]
                ]
            else:
                fields = _whole(now, MAIL_FIELDS, "after" if action == "sent" else "before")
            found.append(
                RecordChange(
                    kind="mail",
                    change=_MAIL_CHANGE[action],  # type: ignore[arg-type]
                    action=action,
                    id=f"mail:{ident}" if action == "sent" else f"mail:{ident}:{action}",
                    title=mail.subject,
                    fields=fields,
                )
            )
    for event in changes.events:
        values = {
            "title": event.summary,
            "start": event.start,
            "end": event.end,
            "attendees": event.attendees,
            "location": event.location,
        }
        if event.change == "updated":
            fields = [
                FieldChange(_EVENT_NAMES.get(name, name), change.get("before"), change.get("after"))
                for name, change in event.changed_fields.items()
                if isinstance(change, dict)
            ]
            order = {name: position for position, name in enumerate(EVENT_FIELDS)}
            fields.sort(key=lambda item: (order.get(item.field, len(order)), item.field))
        else:
            fields = _whole(values, EVENT_FIELDS, "after" if event.change == "created" else "before")
        found.append(
            RecordChange(
                kind="event",
                change=_EVENT_CHANGE[event.change],  # type: ignore[arg-type]
                action=event.change,
                id=f"event:{event.uid}",
                title=event.summary,
                fields=fields,
            )
        )
    for post in changes.chat:
        values = {"channel": post.channel_name or post.channel_id, "author": post.author, "text": post.text}
        where = values["channel"]
        if post.change == "edited":
            fields = [FieldChange("text", post.previous_text, post.text)]
        elif post.change == "reacted":
            fields = [FieldChange("reaction", None, f"{post.emoji} by {post.author or 'unknown'}")]
        else:
            fields = _whole(values, CHAT_FIELDS, "before" if post.change == "deleted" else "after")
        found.append(
            RecordChange(
                kind="chat",
                change=_CHAT_CHANGE[post.change],  # type: ignore[arg-type]
                action=post.change,
                id=f"chat:{post.message_id}:{post.change}",
                title=f"{where}" + (f" · {post.author}" if post.author else ""),
                fields=fields,
            )
        )
    return found


def _format_part_diff(before: Extracted, after: Extracted) -> tuple[list[str], str]:
    """Which parts changed, and a readable account of how (cells for sheets, lines otherwise)."""
    old = {part.name: part for part in before.parts}
    new = {part.name: part for part in after.parts}
    sub_items: list[str] = []
    lines: list[str] = []
    for name, part in new.items():
        previous = old.get(name)
        if previous is None:
            sub_items.append(f"{name} (added)")
            continue
        if previous.text == part.text:
            continue
        sub_items.append(name)
        if part.cells is not None and previous.cells is not None:
            changed, same_formula = cell_changes(previous, part)
            lines.append(f"### {name}: {len(changed)} cell(s) changed")
            if same_formula:
                lines.append(
                    f"[{len(same_formula)} formula cell(s) kept their formula; only the computed "
                    "value shown differs: not listed]"
                )
            for coordinate in changed[:MAX_CELL_CHANGES]:
                was = previous.cells.get(coordinate, "(empty)") or "(empty)"
                now = part.cells.get(coordinate, "(empty)") or "(empty)"
                lines.append(f"{coordinate}: {was} -> {now}")
            if len(changed) > MAX_CELL_CHANGES:
                lines.append(f"[{len(changed) - MAX_CELL_CHANGES} more changed cells not listed]")
        else:
            # Lines are compared without a leading element identifier ([body.p.7]): inserting
            # one paragraph renumbers every later one, which is not a change of theirs.
            diff = list(
                difflib.unified_diff(
                    _without_ids(previous.text), _without_ids(part.text), "before", "after", lineterm="", n=1
                )
            )[2:]
            lines.append(f"### {name}: changed lines")
            lines.extend(diff[:MAX_DIFF_LINES])
            if len(diff) > MAX_DIFF_LINES:
                lines.append(f"[{len(diff) - MAX_DIFF_LINES} more diff lines not listed]")
    for name in old.keys() - new.keys():
        sub_items.append(f"{name} (removed)")
    return sub_items, "\n".join(lines)


_ELEMENT_ID = re.compile(r"^\[(?:body|header|footer)\.[^\]\s]*\] ?")


def _without_ids(text: str) -> list[str]:
    return [_ELEMENT_ID.sub("", line) for line in text.splitlines()]


def _cell_order(coordinate: str) -> tuple[int, int, str]:
    letters = "".join(ch for ch in coordinate if ch.isalpha())
    digits = "".join(ch for ch in coordinate if ch.isdigit())
    column = 0
    for ch in letters.upper():
        column = column * 26 + (ord(ch) - 64)
    return (int(digits) if digits else 0, column, coordinate)


def _file_artifact(change: FileChange, old: Extracted | None, new: Extracted | None) -> Artifact:
    path = virtual_path(change.path)
    file_type = extension(path)
    header = f"File {printable(path)} ({change.change}"
    if change.change == "deleted":
        return Artifact(
            id=f"file:{path}",
            kind="file",
            title=f"{printable(path)} (deleted)",
            text=header + "; the file no longer exists)",
            path=path,
            file_type=file_type,
            change="deleted",
        )
    assert new is not None
    header += f", {change.size_after} bytes)"
    body = [header]
    if change.change == "modified" and old is not None and not old.error and not new.error:
        body.append("Changed parts: " + (", ".join(change.sub_items) or "none visible in the extracted text"))
        _, account = _format_part_diff(old, new)
        if account:
            body.append(account)
        body.append("Final content:")
    body.append(new.text())
    return Artifact(
        id=f"file:{path}",
        kind="file",
        title=f"{printable(path)} ({change.change})",
        text="\n".join(body),
        path=path,
        file_type=file_type,
        change=change.change,
        error=new.error,
    )


def file_artifact_for_unchanged(path_in_snapshot: str, data: bytes, options: ExtractOptions) -> Artifact:
    """An artifact for a file the agent left untouched (a named grading target may ask for it)."""
    path = virtual_path(path_in_snapshot)
    content = extract(path, data, options)
    return Artifact(
        id=f"file:{path}",
        kind="file",
        title=f"{printable(path)} (unchanged)",
        text=f"File {path} (unchanged by the agent, {len(data)} bytes)\n{content.text()}",
        path=path,
        file_type=extension(path),
        change="unchanged",
        error=content.error,
    )


def diff_snapshots(
    before: AnySnapshot, after: AnySnapshot, options: ExtractOptions | None = None
) -> WorldDiff:
    """Diff two snapshots; extraction and parse problems are recorded, never raised."""
    options = options or ExtractOptions()
    old, new = before.entries, after.entries
    file_changes: list[FileChange] = []
    for path in sorted(old.keys() | new.keys()):
        was, now = old.get(path), new.get(path)
        if was is not None and now is not None and was.sha256 == now.sha256:
            continue
        kind = "created" if was is None else "deleted" if now is None else "modified"
        file_changes.append(
            FileChange(
                path=path,
                change=kind,
                size_before=was.size if was else None,
                size_after=now.size if now else None,
                sha256_before=was.sha256 if was else None,
                sha256_after=now.sha256 if now else None,
            )
        )
    changed_paths = {c.path for c in file_changes}
    fs_changed = [c for c in file_changes if c.path.startswith(FS_PREFIX)]
    apps_wanted = {
        p
        for p in changed_paths
        if appdata.is_mail(p)
        or appdata.is_calendar(p)
        or appdata.is_chat_messages(p)
        or appdata.is_coworker_exchanges(p)
    }
    # Names of chat groups come from group_info.json whether or not it changed.
    info_paths = {p for p in new if appdata.is_chat_group_info(p)}
    # A file beyond the cap (a decompression bomb, a huge dataset) is named, not read; so are
    # the files past the total the diff reads into memory (app data first: it is parsed).
    too_large, over_total = _over_budget(fs_changed, apps_wanted | info_paths, old, new, options)
    skipped_apps = (apps_wanted | info_paths) & (too_large | over_total)
    apps_wanted -= too_large | over_total
    info_paths -= too_large | over_total
    readable = [c for c in fs_changed if c.path not in too_large and c.path not in over_total]
    before_bytes = before.read_many({c.path for c in readable if c.change == "modified"} | apps_wanted)
    after_bytes = after.read_many(
        {c.path for c in readable if c.change != "deleted"} | apps_wanted | info_paths
    )

    result = WorldDiff(before=before, after=after, changes=Changes(files=file_changes))
    for change in fs_changed:
        new_content = old_content = None
        if change.path in too_large:
            note = f"not extracted: {change.size_after or change.size_before} bytes exceeds the {options.max_file_bytes}-byte cap"
            new_content = Extracted(kind=extension(change.path) or "file", note=note)
        elif change.path in over_total:
            note = f"not extracted: the changed files read reach the {options.max_total_bytes}-byte total cap"
            new_content = Extracted(kind=extension(change.path) or "file", note=note)
        elif change.change != "deleted":
            new_content = extract(virtual_path(change.path), after_bytes.get(change.path, b""), options)
        if change.change == "modified" and change.path not in too_large | over_total:
            old_content = extract(virtual_path(change.path), before_bytes.get(change.path, b""), options)
            if not old_content.error and not new_content.error:  # type: ignore[union-attr]
                change.sub_items, _ = _format_part_diff(old_content, new_content)  # type: ignore[arg-type]
        result.artifacts.append(_file_artifact(change, old_content, new_content))

    def pick(source: dict[str, bytes], test) -> dict[str, bytes]:
        return {p: d for p, d in source.items() if test(p)}

    mail = appdata.mail_changes(pick(before_bytes, appdata.is_mail), pick(after_bytes, appdata.is_mail))
    result.errors.extend(mail.errors)
    events, errors = appdata.diff_calendar(
        pick(before_bytes, appdata.is_calendar), pick(after_bytes, appdata.is_calendar)
    )
    result.errors.extend(errors)
    chat, errors = appdata.diff_chat(
        pick(before_bytes, appdata.is_chat_messages),
        pick(after_bytes, appdata.is_chat_messages),
        appdata.group_names(pick(after_bytes, appdata.is_chat_group_info)),
    )
    result.errors.extend(errors)
    result.errors.extend(
        f"{virtual_path(path)}: app data not read: past the {options.max_file_bytes}-byte file cap "
        f"or the {options.max_total_bytes}-byte total cap"
        for path in sorted(skipped_apps)
    )
    result.changes.mails_sent, result.changes.events, result.changes.chat = mail.sent, events, chat
    result.changes.mails_deleted, result.changes.mails_edited = mail.deleted, mail.edited
    result.changes.mails_edited_before = mail.edited_before
    if appdata.COWORKER_EXCHANGES in apps_wanted:
        result.changes.coworkers = appdata.coworker_exchanges(
            before_bytes.get(appdata.COWORKER_EXCHANGES), after_bytes.get(appdata.COWORKER_EXCHANGES)
        )
        result.artifacts.extend(_coworker_artifact(e) for e in result.changes.coworkers)
    result.artifacts.extend(_mail_artifact(m, i) for i, m in enumerate(mail.sent))
    result.artifacts.extend(_mail_artifact(m, i, "deleted") for i, m in enumerate(mail.deleted))
    result.artifacts.extend(_mail_artifact(m, i, "edited") for i, m in enumerate(mail.edited))
    result.artifacts.extend(_event_artifact(e) for e in events)
    result.artifacts.extend(_chat_artifact(c) for c in chat)
    return result


def _over_budget(
    fs_changed: list[FileChange],
    app_paths: set[str],
    old: dict[str, SnapshotEntry],
    new: dict[str, SnapshotEntry],
    options: ExtractOptions,
) -> tuple[set[str], set[str]]:
    """(paths over the per-file cap, paths past the total cap) of what the diff would read:
    app data (before and after) first, then the changed files in path order."""
    too_large: set[str] = set()
    over_total: set[str] = set()
    total = 0

    def take(path: str, sizes: list[int]) -> None:
        nonlocal total
        if max(sizes, default=0) > options.max_file_bytes:
            too_large.add(path)
        elif total + sum(sizes) > options.max_total_bytes:
            over_total.add(path)
        else:
            total += sum(sizes)

    for path in sorted(app_paths):
        take(path, [entry.size for entry in (old.get(path), new.get(path)) if entry is not None])
    for change in fs_changed:
        sizes = [change.size_after or 0] if change.change != "deleted" else []
        if change.change == "modified":
            sizes.append(change.size_before or 0)
        if change.change == "deleted" and (change.size_before or 0) > options.max_file_bytes:
            too_large.add(change.path)  # named as before, nothing read
            continue
        take(change.path, sizes)
    return too_large, over_total


def _mail_artifact(mail: MailSent, index: int, change: str = "sent") -> Artifact:
    lines = [
        f"From: {mail.from_}",
        f"To: {', '.join(mail.to)}",
        *([f"Cc: {', '.join(mail.cc)}"] if mail.cc else []),
        *([f"Bcc: {', '.join(mail.bcc)}"] if mail.bcc else []),
        f"Subject: {mail.subject}",
        *([f"Attachments: {', '.join(mail.attachments)}"] if mail.attachments else []),
        *([f"In-Reply-To: {mail.in_reply_to}"] if mail.in_reply_to else []),
        "",
        mail.body,
    ]
    ident = mail.message_id or f"#{index + 1}"
    heading = {
        "sent": "Mail sent",
        "deleted": "Mail deleted (it was there before; as it was)",
        "edited": "Mail edited (it was there before; as it is now)",
    }[change]
    return Artifact(
        id=f"mail:{ident}" if change == "sent" else f"mail:{ident}:{change}",
        kind="mail",
        title=f"mail {change}: {mail.subject}",
        text=f"{heading}\n" + "\n".join(lines),
        change=change,
    )


def _event_artifact(event: EventChange) -> Artifact:
    lines = [f"Calendar event {event.change}: {event.summary}", f"UID: {event.uid}"]
    if event.start:
        lines.append(f"Start: {event.start}")
    if event.end:
        lines.append(f"End: {event.end}")
    if event.attendees:
        lines.append(f"Attendees: {', '.join(event.attendees)}")
    for name, values in event.changed_fields.items():
        lines.append(f"Changed {name}: {values.get('before')!r} -> {values.get('after')!r}")
    return Artifact(
        id=f"event:{event.uid}",
        kind="event",
        title=f"event {event.change}: {event.summary}",
        text="\n".join(lines),
        change=event.change,
    )


def _coworker_artifact(exchange: CoworkerExchange) -> Artifact:
    """One exchange with a persona as the judge reads it: what the agent wrote, what came back."""
    where = f"{exchange.channel} ({exchange.conversation})"
    lines = [
        f"The agent wrote to {exchange.persona} <{exchange.persona_email}> by {where}:",
        exchange.message,
        "",
    ]
    if exchange.status == "over_limit":
        lines.append(f"{exchange.persona} did not answer: the trial's bound on replies was reached.")
    else:
        lines += [f"{exchange.persona} replied ({exchange.status}):", exchange.reply]
    return Artifact(
        id=f"coworker:{exchange.message_id}:{exchange.persona_email}",
        kind="coworker",
        title=f"conversation with {exchange.persona} by {exchange.channel}",
        text="\n".join(lines),
        change="created",
    )


def _chat_artifact(change: ChatChange) -> Artifact:
    where = change.channel_name or change.channel_id
    head = f"Chat message {change.change} in {where} (channel id {change.channel_id})"
    lines = [head, f"Message id: {change.message_id}", f"Author: {change.author or 'unknown'}"]
    if change.emoji:
        lines.append(f"Reaction: {change.emoji}")
    lines.extend(["", change.text])
    return Artifact(
        id=f"chat:{change.message_id}:{change.change}",
        kind="chat",
        title=f"chat {change.change} in {where}",
        text="\n".join(lines),
        change=change.change,
    )
