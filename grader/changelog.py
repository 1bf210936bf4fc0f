"""The change log: one line per change between two snapshots, what the judge reads first.

Changes to what existed before the agent ran (deleted or modified files, deleted or edited
mails, updated or deleted events, deleted or edited chat messages) are the ones a flood of new things must never hide:
they come first and are never left out.  Within a character limit the additions share what
is left, each kind of change its fair share, and what does not fit is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from atoll.grade import Changes
from grader.budget import counted, criterion_words, fair_shares, named_within, printable, size
from grader.snapshot import virtual_path

#: (artifact kind, change) pairs that alter what existed before the agent ran.
ALTERS_EXISTING = frozenset(
    {
        ("file", "deleted"),
        ("file", "modified"),
        ("mail", "deleted"),
        ("mail", "edited"),
        ("event", "updated"),
        ("event", "deleted"),
        ("chat", "deleted"),
        ("chat", "edited"),
    }
)
_NOUNS = {"file": "file", "mail": "mail", "event": "event", "chat": "chat message"}


def change_kind(kind: str, change: str | None) -> str:
    """The kind of change, singular, as budgets and summaries count it: ``deleted file``,
    ``sent mail``, ``updated event``, ``posted chat message``."""
    return f"{change or 'changed'} {_NOUNS.get(kind, kind)}"


@dataclass
class _Entry:
    """One change-log line: its kind of change, the full and the short form, and its path."""

    kind: str
    existing: bool
    full: str
    short: str
    path: str | None = None


def _entries(changes: Changes) -> list[_Entry]:
    entries: list[_Entry] = []
    for change in changes.files:
        where = printable(virtual_path(change.path))
        detail = f" [{printable(', '.join(change.sub_items))}]" if change.sub_items else ""
        line = f"file {change.change}: {where}"
        existing = ("file", change.change) in ALTERS_EXISTING
        entries.append(_Entry(change_kind("file", change.change), existing, line + detail, line, where))
    for mail in changes.mails_sent:
        line = f"mail sent to {printable(', '.join(mail.to + mail.cc))}: {mail.subject!r}"
        entries.append(_Entry(change_kind("mail", "sent"), False, line, line))
    for what, mails in (("deleted", changes.mails_deleted), ("edited", changes.mails_edited)):
        for mail in mails:
            line = f"mail {what}: {mail.subject!r} from {printable(mail.from_)}"
            entries.append(_Entry(change_kind("mail", what), True, line, line))
    for event in changes.events:
        fields = f" (fields: {', '.join(event.changed_fields)})" if event.changed_fields else ""
        line = f"event {event.change}: {event.summary!r} at {event.start}"
        existing = ("event", event.change) in ALTERS_EXISTING
        entries.append(_Entry(change_kind("event", event.change), existing, line + fields, line))
    for chat in changes.chat:
        line = f"chat {chat.change} in {printable(chat.channel_name or chat.channel_id)}"
        existing = ("chat", chat.change) in ALTERS_EXISTING
        entries.append(_Entry(change_kind("chat", chat.change), existing, line, line))
    return entries


class ChangeLog(str):
    """The change log: one line per change, changes to what existed before first.

    As a string it is the whole log (what the evidence digest hashes); :meth:`within` renders
    it for a character limit."""

    changes: Changes

    def __new__(cls, changes: Changes) -> ChangeLog:
        log = super().__new__(cls, change_log(changes))
        log.changes = changes
        return log

    def within(self, limit: int, criterion: str = "") -> str:
        """The log in about ``limit`` characters (see :func:`change_log`)."""
        return str(self) if len(self) <= limit else change_log(self.changes, limit, criterion)


def change_log(changes: Changes, limit: int | None = None, criterion: str = "") -> str:
    """One line per change; what the judge reads first.

    Changes to what existed before (deleted and modified files, deleted or edited mails,
    updated or deleted events, deleted or edited chat messages) come first and are never left out: past ``limit`` they
    lose their detail (changed sheets, fields), then as many as fit are named (those whose
    path holds a word of ``criterion`` first, then those of the smallest folders) and the
    rest counted per folder.  The additions
    share what is left, each kind of change (created files, sent mails, …) its fair share, so
    one kind cannot crowd out the others; what does not fit is counted
    (``[312 created files not listed]``)."""
    entries = _entries(changes)
    if not entries:
        return "(no changes to the world)"
    existing = [entry for entry in entries if entry.existing]
    added = [entry for entry in entries if not entry.existing]
    if limit is None or size([entry.full for entry in entries]) <= limit:
        return "\n".join(entry.full for entry in existing + added)
    head = [entry.full for entry in existing]
    if size(head) > limit:
        head = [entry.short for entry in existing]
    groups: dict[str, list[_Entry]] = {}
    for entry in added:
        groups.setdefault(entry.kind, []).append(entry)
    summary_room = 48  # the line that counts what a kind could not list
    if size(head) > limit:
        # Naming more of them must not leave the additions no room at all: they keep up to half.
        room = min(size([entry.full for entry in added]) + summary_room * len(groups), limit // 2)
        head = named_within(
            [(entry.kind, entry.path, entry.short) for entry in existing],
            limit - room,
            criterion_words(criterion),
        )
    shares = fair_shares(
        [size([entry.full for entry in group]) for group in groups.values()],
        limit - size(head) - summary_room * len(groups),
    )
    tail: list[str] = []
    for (kind, group), share in zip(groups.items(), shares, strict=True):
        listed = used = 0
        for entry in group:
            if used + len(entry.full) + 1 > share:
                break
            tail.append(entry.full)
            listed, used = listed + 1, used + len(entry.full) + 1
        if listed < len(group):
            tail.append(f"[{counted(len(group) - listed, kind)} not listed]")
    return "\n".join(head + tail)
