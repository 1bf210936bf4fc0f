"""Write a Google Chat Takeout export: spaces and DMs with threads, reactions, deletions.

A group spec is a dict: ``group_id`` ("Space …" or "DM …"), ``name`` (spaces only),
``members`` (people dicts) and ``messages``: dicts with ``author``, ``at`` (aware UTC
datetime), ``text``, optional ``topic`` (the index in ``messages`` of the root post this
one replies to), ``reactions`` (``[(emoji, [people])]``) and ``deleted``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def takeout_date(moment: datetime) -> str:
    """Takeout's date text, e.g. ``Monday, January 8, 2024 at 10:15:32 AM UTC``."""
    moment = moment.astimezone(UTC)
    hour = moment.hour % 12 or 12
    return (
        f"{moment:%A}, {moment:%B} {moment.day}, {moment.year} at "
        f"{hour}:{moment:%M:%S} {'AM' if moment.hour < 12 else 'PM'} UTC"
    )


def stable_id(*parts: str, length: int = 11) -> str:
    """A Takeout-looking id derived from ``parts`` (same parts, same id)."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(_ID_ALPHABET[b % 64] for b in digest[:length])


def _human(person: dict[str, str]) -> dict[str, str]:
    return {"name": person["name"], "email": person["email"], "user_type": "Human"}


def group_messages(group: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``messages.json`` records of ``group``, in order."""
    code = group["group_id"].split(" ", 1)[1]
    moments = [spec["at"] for spec in group["messages"]]
    if moments != sorted(moments):
        raise ValueError(f"chat group {group['group_id']}: messages are not in time order")
    topics: list[str] = []
    records = []
    for index, spec in enumerate(group["messages"]):
        if spec.get("topic") is None:
            topic = stable_id(code, "topic", str(index))
            unique = topic
        else:
            topic = topics[spec["topic"]]
            unique = stable_id(code, "reply", str(index))
        topics.append(topic)
        record: dict[str, Any] = {
            "creator": _human(spec["author"]),
            "created_date": takeout_date(spec["at"]),
            "text": "" if spec.get("deleted") else spec["text"],
            "topic_id": topic,
            "message_id": f"{code}/{topic}/{unique}",
            "reactions": [
                {"emoji": {"unicode": emoji}, "reactor_emails": [p["email"] for p in people]}
                for emoji, people in ([] if spec.get("deleted") else spec.get("reactions", []))
            ],
            "annotations": [],
        }
        if spec.get("deleted"):
            record["message_state"] = "DELETED"
        records.append(record)
    return records


def write_chat(root: Path, groups: list[dict[str, Any]], *, user: dict[str, str], user_id: str) -> None:
    """Write ``groups`` under ``root`` (``…/chat/Google Chat``) plus the user's user_info.json."""
    for group in groups:
        folder = root / "Groups" / group["group_id"]
        folder.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {"members": [_human(p) for p in group["members"]]}
        if group.get("name"):
            info = {"name": group["name"], **info}
        _dump(folder / "group_info.json", info)
        _dump(folder / "messages.json", {"messages": group_messages(group)})
    user_folder = root / "Users" / f"User {user_id}"
    user_folder.mkdir(parents=True, exist_ok=True)
    memberships = [
        {
            "group_name": group.get("name") or ", ".join(p["name"] for p in group["members"] if p != user),
            "group_id": group["group_id"],
            "membership_state": "MEMBER",
        }
        for group in groups
    ]
    _dump(user_folder / "user_info.json", {"user": _human(user), "membership_info": memberships})


def _dump(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
