"""How messages are shown to the agent: structured summaries and readable lines."""

from __future__ import annotations

from typing import Any

from atoll.formats.mail.index import MailEntry
from mcp_servers.mail.store import MailStore


def iso(entry: MailEntry) -> str | None:
    return entry.date.isoformat() if entry.date else None


def summary(store: MailStore, entry: MailEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "mail_id": entry.mail_id,
        "thread_id": entry.thread_id,
        "from": entry.sender,
        "to": entry.to,
        "cc": entry.cc,
        "subject": entry.subject,
        "date": iso(entry),
        "has_attachments": entry.has_attachments,
        "labels": entry.labels,
        "mailbox": store.display_name(entry.file),
    }
    if entry.bcc and store.is_own(entry):
        data["bcc"] = entry.bcc
    return data


def summary_line(number: int, item: dict[str, Any]) -> str:
    date = (item["date"] or "no date")[:16].replace("T", " ")
    clip = " [attachments]" if item["has_attachments"] else ""
    to = ", ".join(item["to"][:3]) + (" ..." if len(item["to"]) > 3 else "")
    return f"{number}. {date} | From: {item['from']} | To: {to} | {item['subject'] or '(no subject)'}{clip} | id: {item['mail_id']}"


def page_text(title: str, data: dict[str, Any]) -> str:
    mails = data["mails"]
    first = data["offset"] + 1
    lines = [
        f"{title}: {first if mails else 0}-{data['offset'] + len(mails)} of {data['total']} (newest first)"
    ]
    lines += [summary_line(first + i, item) for i, item in enumerate(mails)]
    if data["has_more"]:
        lines.append(f"More: offset={data['offset'] + len(mails)}")
    for notice in data.get("notices", []):
        lines.append(f"Note: {notice}")
    return "\n".join(lines)
