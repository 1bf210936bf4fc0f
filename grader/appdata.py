"""Typed app-data changes between two snapshots: mails sent, calendar events, chat messages.

Every function takes the ``{member path: bytes}`` contents of the relevant files before and
after and returns contract models from ``atoll.grade``.  Unparseable files are reported in
the returned error list instead of raising, so one corrupt export never hides the others.
"""

from __future__ import annotations

import email.policy
import json
import mailbox
import os
import tempfile
from datetime import date, datetime
from email.message import EmailMessage, Message
from email.utils import getaddresses
from hashlib import sha256
from typing import Any

from atoll.grade import ChatChange, EventChange, MailSent

MAIL_PREFIX = ".apps_data/mail/"
CALENDAR_PREFIX = ".apps_data/calendar/"
CHAT_PREFIX = ".apps_data/chat/"


def is_mail(path: str) -> bool:
    return path.startswith(MAIL_PREFIX) and path.endswith(".mbox")


def is_calendar(path: str) -> bool:
    return path.startswith(CALENDAR_PREFIX) and path.endswith(".ics")


def is_chat_messages(path: str) -> bool:
    return path.startswith(CHAT_PREFIX) and path.endswith("/messages.json")


def is_chat_group_info(path: str) -> bool:
    return path.startswith(CHAT_PREFIX) and path.endswith("/group_info.json")


# --- mail ----------------------------------------------------------------------------------


def _mbox_messages(data: bytes) -> list[Message]:
    # mailbox.mbox needs a file name; the snapshot is in memory.
    handle, name = tempfile.mkstemp(suffix=".mbox")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        box = mailbox.mbox(name, create=False)
        try:
            return [
                email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
                for key in box.iterkeys()
            ]
        finally:
            box.close()
    finally:
        os.unlink(name)


def _message_key(message: Message) -> str:
    message_id = (message.get("Message-ID") or "").strip()
    if message_id:
        return message_id
    return "sha256:" + sha256(message.as_bytes()).hexdigest()


def _addresses(message: Message, header: str) -> list[str]:
    values = message.get_all(header) or []
    return [address for _, address in getaddresses([str(v) for v in values]) if address]


def _body_text(message: Message) -> str:
    if isinstance(message, EmailMessage):
        part = message.get_body(preferencelist=("plain", "html"))
        if part is not None:
            try:
                return str(part.get_content()).strip()
            except (LookupError, ValueError):
                pass
    payload = message.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode("utf-8", "replace").strip()
    return ""


def _attachments(message: Message) -> list[str]:
    names: list[str] = []
    for part in message.walk():
        filename = part.get_filename()
        if filename and part.get_content_disposition() in ("attachment", "inline", None):
            names.append(filename)
    return names


def mail_from_message(message: Message) -> MailSent:
    return MailSent(
        message_id=(message.get("Message-ID") or "").strip() or None,
        **{"from": str(message.get("From") or "")},
        to=_addresses(message, "To"),
        cc=_addresses(message, "Cc"),
        # The mail server keeps Bcc recipients out of the visible headers (X-Atoll-Bcc).
        bcc=_addresses(message, "Bcc") or _addresses(message, "X-Atoll-Bcc"),
        subject=str(message.get("Subject") or ""),
        body=_body_text(message),
        attachments=_attachments(message),
        in_reply_to=(message.get("In-Reply-To") or "").strip() or None,
    )


def diff_mail(before: dict[str, bytes], after: dict[str, bytes]) -> tuple[list[MailSent], list[str]]:
    """Messages present after but not before (by Message-ID) across all mbox files = mails sent."""
    errors: list[str] = []
    known: set[str] = set()
    for path, data in before.items():
        try:
            known.update(_message_key(m) for m in _mbox_messages(data))
        except Exception as exc:  # noqa: BLE001 - corrupt exports
            errors.append(f"{path}: cannot parse mbox: {exc}")
    sent: list[MailSent] = []
    for path in sorted(after):
        try:
            messages = _mbox_messages(after[path])
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{path}: cannot parse mbox: {exc}")
            continue
        for message in messages:
            key = _message_key(message)
            if key not in known:
                known.add(key)
                sent.append(mail_from_message(message))
    return sent, errors


# --- calendar ------------------------------------------------------------------------------

_EVENT_FIELDS = (
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


def _ical_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_ical_value(v) for v in value]
    decoded = getattr(value, "dt", None)
    if isinstance(decoded, datetime | date):
        return decoded.isoformat()
    if hasattr(value, "to_ical"):
        raw = value.to_ical()
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return str(value)


def _events(data: bytes) -> dict[str, dict[str, Any]]:
    from icalendar import Calendar

    calendar = Calendar.from_ical(data)
    events: dict[str, dict[str, Any]] = {}
    for component in calendar.walk("VEVENT"):
        uid = str(component.get("UID") or "")
        recurrence = component.get("RECURRENCE-ID")
        key = uid + (f"#{_ical_value(recurrence)}" if recurrence is not None else "")
        fields = {
            name: _ical_value(component.get(name))
            for name in _EVENT_FIELDS
            if component.get(name) is not None
        }
        attendees = fields.get("attendee", [])
        if not isinstance(attendees, list):
            attendees = [attendees]
        fields["attendee"] = sorted(str(a).removeprefix("mailto:").removeprefix("MAILTO:") for a in attendees)
        events[key or f"sha256:{sha256(component.to_ical()).hexdigest()}"] = fields
    return events


def _event_change(change: str, uid: str, fields: dict[str, Any], changed: dict[str, Any]) -> EventChange:
    return EventChange(
        change=change,  # type: ignore[arg-type]
        uid=uid,
        summary=str(fields.get("summary", "")),
        start=fields.get("dtstart"),
        end=fields.get("dtend"),
        attendees=list(fields.get("attendee", [])),
        changed_fields=changed,
    )


def diff_calendar(before: dict[str, bytes], after: dict[str, bytes]) -> tuple[list[EventChange], list[str]]:
    """Events created, updated (with the fields that changed) and deleted, keyed by UID."""
    errors: list[str] = []

    def collect(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
        events: dict[str, dict[str, Any]] = {}
        for path in sorted(files):
            try:
                events.update(_events(files[path]))
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


def _messages(data: bytes) -> list[dict[str, Any]]:
    parsed = json.loads(data)
    messages = parsed.get("messages", []) if isinstance(parsed, dict) else parsed
    return [m for m in messages if isinstance(m, dict)]


def _message_id(message: dict[str, Any]) -> str:
    return str(
        message.get("message_id")
        or message.get("id")
        or sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()
    )


def _is_root(message: dict[str, Any]) -> bool:
    message_id = str(message.get("message_id") or "")
    topic = str(message.get("topic_id") or "")
    return not topic or message_id.rsplit("/", 1)[-1] == topic


def _reactions(message: dict[str, Any]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for reaction in message.get("reactions") or []:
        emoji = reaction.get("emoji") or {}
        symbol = str(emoji.get("unicode") or emoji.get("custom_emoji", {}).get("name") or emoji)
        for reactor in reaction.get("reactor_emails") or [""]:
            pairs.add((symbol, reactor))
    return pairs


def diff_chat(
    before: dict[str, bytes], after: dict[str, bytes], group_names: dict[str, str]
) -> tuple[list[ChatChange], list[str]]:
    """Messages posted, replied, reacted to, deleted or edited, per group (channel)."""
    errors: list[str] = []
    changes: list[ChatChange] = []
    for path in sorted(after):
        group = _group_id(path)
        try:
            new = {_message_id(m): m for m in _messages(after[path])}
            old = {_message_id(m): m for m in _messages(before[path])} if path in before else {}
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{path}: cannot parse chat messages: {exc}")
            continue
        name = group_names.get(group, "")

        def make(
            kind: str,
            message_id: str,
            message: dict[str, Any],
            emoji: str | None = None,
            group: str = group,
            name: str = name,
        ) -> ChatChange:
            creator = message.get("creator") or {}
            return ChatChange(
                change=kind,  # type: ignore[arg-type]
                channel_id=group,
                channel_name=name,
                message_id=message_id,
                text=str(message.get("text") or ""),
                emoji=emoji,
                author=creator.get("email") or creator.get("name"),
            )

        for message_id, message in new.items():
            previous = old.get(message_id)
            if previous is None:
                changes.append(make("posted" if _is_root(message) else "replied", message_id, message))
                continue
            if message.get("message_state") == "DELETED" and previous.get("message_state") != "DELETED":
                changes.append(make("deleted", message_id, previous))
                continue
            if (message.get("text") or "") != (previous.get("text") or ""):
                changes.append(make("edited", message_id, message))
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
