"""Typed app-data changes between two snapshots: mails sent, calendar events, chat messages.

Every function takes the ``{member path: bytes}`` contents of the relevant files before and
after and returns contract models from ``atoll.grade``.  Unparseable files are reported in
the returned error list instead of raising, so one corrupt export never hides the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from email.utils import getaddresses
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from atoll.content_cache import ContentCache
from atoll.coworkers import EXCHANGES_FILE, CoworkerExchange
from atoll.grade import ChatChange, EventChange, MailSent

if TYPE_CHECKING:
    from atoll.formats.chat.messages import Message
    from atoll.formats.mail.index import MailEntry

MAIL_PREFIX = ".apps_data/mail/"
CALENDAR_PREFIX = ".apps_data/calendar/"
CHAT_PREFIX = ".apps_data/chat/"
COWORKER_EXCHANGES = ".apps_data/" + EXCHANGES_FILE


def is_mail(path: str) -> bool:
    return path.startswith(MAIL_PREFIX) and path.endswith(".mbox")


def is_calendar(path: str) -> bool:
    return path.startswith(CALENDAR_PREFIX) and path.endswith(".ics")


def is_chat_messages(path: str) -> bool:
    return path.startswith(CHAT_PREFIX) and path.endswith("/messages.json")


def is_chat_group_info(path: str) -> bool:
    return path.startswith(CHAT_PREFIX) and path.endswith("/group_info.json")


def is_coworker_exchanges(path: str) -> bool:
    return path == COWORKER_EXCHANGES


def coworker_exchanges(before: bytes | None, after: bytes | None) -> list[CoworkerExchange]:
    """The exchanges with personas recorded after but not before (the engine appends one line
    per message: docs/coworkers.md)."""
    from atoll.coworkers import read_exchanges

    old = read_exchanges(before or b"")
    new = read_exchanges(after or b"")
    seen = {(e.message_id, e.persona_email) for e in old}
    return [e for e in new if (e.message_id, e.persona_email) not in seen]


# --- mail ----------------------------------------------------------------------------------


def _mbox_messages(path: str, data: bytes) -> list[tuple[MailEntry, bytes]]:
    """Every message of an mbox as the mail tools index it: (entry, message bytes)."""
    from atoll.formats.mail.index import read_index
    from atoll.formats.mail.mbox import message_bytes

    return [
        (entry, message_bytes(data[entry.span.start : entry.span.end]))
        for entry in read_index(data, path).entries
    ]


def _bare(values: list[str]) -> list[str]:
    return [address for _, address in getaddresses(values) if address]


def mail_sent(entry: MailEntry, raw: bytes) -> MailSent:
    """A message as the judge reads it: the mail tools' index entry, body and attachments."""
    from atoll.formats.mail.headers import addresses, parse_header_block, split_header
    from atoll.formats.mail.text import attachments_of, message_text

    # The mail server keeps Bcc recipients out of the visible headers (X-Atoll-Bcc, which the
    # index reads); other writers leave a Bcc header.
    fields, _ = parse_header_block(split_header(raw)[0], frozenset({"bcc"}))
    return MailSent(
        message_id=entry.mail_id,
        **{"from": entry.sender},
        to=_bare(entry.to),
        cc=_bare(entry.cc),
        bcc=_bare(addresses(fields.get("bcc"))) or _bare(entry.bcc),
        subject=entry.subject,
        body=message_text(raw)[0],
        attachments=[attachment.filename for attachment in attachments_of(raw)],
        in_reply_to=f"<{entry.in_reply_to}>" if entry.in_reply_to else None,
    )


def diff_mail(before: dict[str, bytes], after: dict[str, bytes]) -> tuple[list[MailSent], list[str]]:
    """Messages present after but not before (by Message-ID, else the id the mail tools give a
    message without one) across all mbox files = mails sent."""
    changes = mail_changes(before, after)
    return changes.sent, changes.errors


@dataclass
class MailChanges:
    """What became of the mail between two snapshots."""

    sent: list[MailSent] = field(default_factory=list)
    deleted: list[MailSent] = field(default_factory=list)
    edited: list[MailSent] = field(default_factory=list)
    edited_before: list[MailSent] = field(default_factory=list)  # ``edited`` as they were
    errors: list[str] = field(default_factory=list)


def _mail_by_key(files: dict[str, bytes], errors: list[str]) -> dict[str, tuple[MailEntry, bytes]]:
    """Every message of ``files`` by key, the first of a key kept, in path order."""
    messages: dict[str, tuple[MailEntry, bytes]] = {}
    for path in sorted(files):
        try:
            for entry, raw in _mbox_messages(path, files[path]):
                messages.setdefault(entry.key, (entry, raw))
        except Exception as exc:  # noqa: BLE001 - corrupt exports
            errors.append(f"{path}: cannot parse mbox: {exc}")
    return messages


def mail_changes(before: dict[str, bytes], after: dict[str, bytes]) -> MailChanges:
    """Mails sent (messages new after, by key), deleted (there before, in no mbox after) and
    edited (there before and after with other content) across the changed mbox files."""
    changes = MailChanges()
    old, new = _mail_by_key(before, changes.errors), _mail_by_key(after, changes.errors)
    for key, (entry, raw) in new.items():
        if key not in old:
            changes.sent.append(mail_sent(entry, raw))
        elif old[key][1].rstrip() != raw.rstrip():
            # Separators may move when a message is appended after it: compared as parsed too.
            was, now = mail_sent(*old[key]), mail_sent(entry, raw)
            if was != now:
                changes.edited.append(now)
                changes.edited_before.append(was)
    # A message the mail tools can no longer read (its mbox gone or mangled) is deleted.
    changes.deleted = [mail_sent(entry, raw) for key, (entry, raw) in old.items() if key not in new]
    return changes


# --- calendar ------------------------------------------------------------------------------


#: Calendars read, by the sha256 of their bytes: every trial of a world diffs the same seed
#: calendar (and, when the agent left it alone, the same one after), so a content is parsed
#: once per process. Each caller gets fields of its own (:func:`_events`).
_CALENDARS: ContentCache[Any] = ContentCache(max_entries=64)


def _events(path: str, data: bytes, errors: list[str]) -> dict[str, dict[str, Any]]:
    """The VEVENTs of one .ics file by key, read by the calendar format's reader
    (:func:`atoll.formats.ics.read_events`, once per content); skipped events are named in
    ``errors``."""
    from atoll.formats.ics import read_events

    # A file that is no calendar raises: never kept.
    read = _CALENDARS.get(data, None, lambda: read_events(data))
    errors.extend(f"{path}: {problem}" for problem in read.problems)
    return {
        event.key: {
            name: list(value) if isinstance(value, list) else value for name, value in event.fields.items()
        }
        for event in read.events
    }


def _event_change(change: str, uid: str, fields: dict[str, Any], changed: dict[str, Any]) -> EventChange:
    return EventChange(
        change=change,
        uid=uid,
        summary=str(fields.get("summary", "")),
        start=fields.get("dtstart"),
        end=fields.get("dtend"),
        attendees=list(fields.get("attendee", [])),
        location=str(fields["location"]) if fields.get("location") else None,
        changed_fields=changed,
    )


def diff_calendar(before: dict[str, bytes], after: dict[str, bytes]) -> tuple[list[EventChange], list[str]]:
    """Events created, updated (with the fields that changed) and deleted, keyed by UID."""
    errors: list[str] = []

    def collect(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
        events: dict[str, dict[str, Any]] = {}
        for path in sorted(files):
            try:
                events.update(_events(path, files[path], errors))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{path}: cannot parse calendar: {exc}")
        return events

    old, new = collect(before), collect(after)
    changes: list[EventChange] = []
    for uid in sorted(new.keys() - old.keys()):
        changes.append(_event_change("created", uid, new[uid], {}))
    for uid in sorted(old.keys() & new.keys()):
        if old[uid] != new[uid]:
            fields = sorted(old[uid].keys() | new[uid].keys())
            changed = {
                name: {"before": old[uid].get(name), "after": new[uid].get(name)}
                for name in fields
                if old[uid].get(name) != new[uid].get(name)
            }
            changes.append(_event_change("updated", uid, new[uid], changed))
    for uid in sorted(old.keys() - new.keys()):
        changes.append(_event_change("deleted", uid, old[uid], {}))
    return changes, errors


# --- chat ----------------------------------------------------------------------------------


def _group_id(messages_path: str) -> str:
    return messages_path.rsplit("/", 2)[-2]


#: Chat spaces read, by the sha256 of their bytes and their path: every trial of a world that
#: posts to a space diffs the same seed version of it. The dictionaries are only read.
_SPACES: ContentCache[dict[str, Message]] = ContentCache(
    max_entries=256, max_weight=500_000, weigh=lambda messages: len(messages)
)


def _messages(path: str, data: bytes) -> dict[str, Message]:
    """A group's messages as the chat tools index them, by message id (a record without one
    by its content hash), read once per content. Raises ValueError on a file the tools cannot
    read either."""
    return _SPACES.get(data, path, lambda: _read_messages(path, data))


def _read_messages(path: str, data: bytes) -> dict[str, Message]:
    from atoll.formats.chat.messages import index_messages

    parsed = index_messages(json.loads(data), label=path)
    if parsed.error:
        raise ValueError(parsed.error)
    return {
        message.message_id
        or str(
            message.record.get("id")
            or sha256(json.dumps(message.record, sort_keys=True).encode()).hexdigest()
        ): message
        for message in parsed.messages
    }


def _reactions(message: Message) -> set[tuple[str, str]]:
    from atoll.formats.chat.messages import reactions

    return {(label, reactor) for label, users in reactions(message.record) for reactor in users or [""]}


def diff_chat(
    before: dict[str, bytes], after: dict[str, bytes], group_names: dict[str, str]
) -> tuple[list[ChatChange], list[str]]:
    """Messages posted, replied, reacted to, deleted or edited, per group (channel)."""
    errors: list[str] = []
    changes: list[ChatChange] = []
    for path in sorted(after):
        group = _group_id(path)
        try:
            new = _messages(path, after[path])
            old = _messages(path, before[path]) if path in before else {}
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{path}: cannot parse chat messages: {exc}")
            continue
        name = group_names.get(group, "")

        def make(
            kind: str,
            message_id: str,
            message: Message,
            emoji: str | None = None,
            group: str = group,
            name: str = name,
        ) -> ChatChange:
            return ChatChange(
                change=kind,
                channel_id=group,
                channel_name=name,
                message_id=message_id,
                text=message.text,
                emoji=emoji,
                author=message.author_email or message.author_name or None,
            )

        for message_id, message in new.items():
            previous = old.get(message_id)
            if previous is None:
                changes.append(make("posted" if message.is_root else "replied", message_id, message))
                continue
            if message.deleted and not previous.deleted:
                changes.append(make("deleted", message_id, previous))
                continue
            if message.text != previous.text:
                edited = make("edited", message_id, message)
                edited.previous_text = previous.text
                changes.append(edited)
            for symbol, reactor in sorted(_reactions(message) - _reactions(previous)):
                change = make("reacted", message_id, message, emoji=symbol)
                change.author = reactor or None
                changes.append(change)
        for message_id in old.keys() - new.keys():
            changes.append(make("deleted", message_id, old[message_id]))
    return changes, errors


def group_names(files: dict[str, bytes]) -> dict[str, str]:
    """``group id -> name`` from ``group_info.json`` files (DMs have no name)."""
    names: dict[str, str] = {}
    for path, data in files.items():
        try:
            info = json.loads(data)
        except ValueError:
            continue
        if isinstance(info, dict) and info.get("name"):
            names[_group_id(path)] = str(info["name"])
    return names
