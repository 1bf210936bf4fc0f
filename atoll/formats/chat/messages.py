"""A Google Chat Takeout ``messages.json`` read into an index: the messages with real UTC
timestamps, root posts newest first and replies per topic in time order.

The chat server's tools and the grader read messages with :func:`index_messages`, so a
post has the same id, topic, author and text for the agent and the judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from atoll.formats.chat.timestamps import parse_takeout_date

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Message:
    """One record of messages.json, with what sorting and filtering need."""

    position: int  # index in the file's "messages" list
    message_id: str
    topic_id: str
    created: datetime | None  # aware UTC, None when the date is unreadable
    author_name: str
    author_email: str
    text: str
    deleted: bool
    record: dict[str, Any]  # the raw record (never mutated)

    @property
    def is_root(self) -> bool:
        """A root post's unique id part equals its topic id (replies share the topic)."""
        return self.message_id.rsplit("/", 1)[-1] == self.topic_id or not self.topic_id

    @property
    def sort_time(self) -> datetime:
        return self.created or _EPOCH


@dataclass
class GroupMessages:
    """A parsed messages.json (or why it could not be parsed)."""

    messages: list[Message] = field(default_factory=list)
    roots_newest_first: list[int] = field(default_factory=list)  # positions
    replies: dict[str, list[int]] = field(default_factory=dict)  # topic -> positions, oldest first
    by_id: dict[str, int] = field(default_factory=dict)
    code: str | None = None  # the message-id prefix used by this group
    error: str | None = None
    problems: list[str] = field(default_factory=list)


def index_messages(raw: Any, *, label: str) -> GroupMessages:
    """Index the decoded content of one messages.json (``label`` names it in problems)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("messages", []), list):
        return GroupMessages(error=f"{label}: expected an object with a 'messages' list")
    parsed = GroupMessages()
    bad_dates = 0
    for position, record in enumerate(raw.get("messages", [])):
        if not isinstance(record, dict):
            parsed.problems.append(f"{label}: message #{position} is not an object; skipped")
            continue
        creator = record.get("creator") if isinstance(record.get("creator"), dict) else {}
        message_id = str(record.get("message_id") or "")
        topic_id = str(record.get("topic_id") or "")
        try:
            created = parse_takeout_date(record.get("created_date", ""))
        except ValueError:
            created = None
            bad_dates += 1
        message = Message(
            position=position,
            message_id=message_id,
            topic_id=topic_id,
            created=created,
            author_name=str(creator.get("name") or ""),
            author_email=str(creator.get("email") or ""),
            text=str(record.get("text") or ""),
            deleted=str(record.get("message_state", "")).upper() == "DELETED",
            record=record,
        )
        parsed.messages.append(message)
        if message_id:
            parsed.by_id.setdefault(message_id, len(parsed.messages) - 1)
            if parsed.code is None and message_id.count("/") >= 2:
                parsed.code = message_id.split("/", 1)[0]
    if bad_dates:
        parsed.problems.append(
            f"{label}: {bad_dates} message(s) have unreadable created_date; sorted as oldest"
        )
    roots: list[int] = []
    for index, message in enumerate(parsed.messages):
        if message.is_root:
            roots.append(index)
        else:
            parsed.replies.setdefault(message.topic_id, []).append(index)
    messages = parsed.messages
    roots.sort(key=lambda i: (messages[i].sort_time, messages[i].position), reverse=True)
    parsed.roots_newest_first = roots
    for positions in parsed.replies.values():
        positions.sort(key=lambda i: (messages[i].sort_time, messages[i].position))
    return parsed


def reactions(record: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``(emoji, reactor emails)`` per reaction of a raw record: the emoji's unicode, else a
    custom emoji's name, else ``?``."""
    out = []
    for reaction in record.get("reactions") or []:
        if not isinstance(reaction, dict):
            continue
        emoji = reaction.get("emoji") if isinstance(reaction.get("emoji"), dict) else {}
        label = emoji.get("unicode") or (emoji.get("custom_emoji") or {}).get("name") or "?"
        out.append((str(label), [str(e) for e in reaction.get("reactor_emails") or []]))
    return out
