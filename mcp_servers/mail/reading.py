"""Reading tools: list_mails, read_mail, search_mail."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time
from typing import Annotated, Any

from pydantic import Field

from atoll.errors import ErrorCode
from atoll.formats.mail.headers import normalize_id
from atoll.formats.mail.text import attachments_of, message_text
from mcp_servers._core import ToolError, ToolOutput, WorldPath
from mcp_servers.mail.results import MailMessage, MailPage
from mcp_servers.mail.server import SERVER
from mcp_servers.mail.store import MailStore
from mcp_servers.mail.views import iso, page_text, summary

MAX_BODY_CHARS = 100_000
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@SERVER.tool(action="list", read_only=True)
def list_mails(
    store: MailStore,
    limit: Annotated[int, Field(ge=1, le=100)] = 50,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> ToolOutput[MailPage]:
    """List messages from all mailboxes, newest first.

    Args:
        limit: how many messages to return (1-100).
        offset: how many of the newest messages to skip (for the next page).
    """
    view = store.view()
    page = view.entries[offset : offset + limit]
    data: dict[str, Any] = {
        "mails": [summary(store, entry) for entry in page],
        "total": len(view.entries),
        "offset": offset,
        "limit": limit,
        "has_more": offset + len(page) < len(view.entries),
    }
    notices = store.notices(view)
    if notices:
        data["notices"] = notices
    return ToolOutput(data=MailPage.from_fields(data), text=page_text("Mails", data))


@SERVER.tool(action="read")
def read_mail(
    store: MailStore, mail_id: str, save_attachments_to: str | None = None
) -> ToolOutput[MailMessage]:
    """Read one message: headers, body text (HTML converted to text) and its attachments.

    Args:
        mail_id: the message's id (Message-ID, with or without angle brackets).
        save_attachments_to: folder (e.g. "/Downloads") where the message's attachments are saved as files.
    """
    view = store.view()
    entry = store.get(view, mail_id)
    raw = store.raw(entry)
    body, body_format = message_text(raw)
    truncated = len(body) > MAX_BODY_CHARS
    attachments = attachments_of(raw)
    listed: list[dict[str, Any]] = [
        {"filename": a.filename, "content_type": a.content_type, "size": a.size} for a in attachments
    ]
    if save_attachments_to is not None and attachments:
        folder = store.ctx.files.at(save_attachments_to, argument="save_attachments_to").require(
            "dir", must_exist=False
        )
        for item, attachment in zip(listed, attachments, strict=True):
            item["saved_to"] = _save(store, folder, attachment.filename, attachment.data)
    data = summary(store, entry)
    data.update(
        in_reply_to=f"<{entry.in_reply_to}>" if entry.in_reply_to else None,
        references=[f"<{ref}>" for ref in entry.references],
        body=body[:MAX_BODY_CHARS],
        body_format=body_format,
        body_truncated=truncated,
        attachments=listed,
    )
    lines = [
        f"From: {entry.sender}",
        f"To: {', '.join(entry.to)}",
        *([f"Cc: {', '.join(entry.cc)}"] if entry.cc else []),
        *([f"Bcc: {', '.join(data['bcc'])}"] if data.get("bcc") else []),
        f"Date: {iso(entry) or entry.date_header or 'unknown'}",
        f"Subject: {entry.subject}",
        f"Mail id: {entry.mail_id}   Thread: {entry.thread_id}",
        "",
        body[:MAX_BODY_CHARS] + ("\n[body truncated]" if truncated else ""),
    ]
    if listed:
        lines.append("")
        lines.append("Attachments:")
        lines += [
            f"- {a['filename']} ({a['content_type']}, {a['size']} bytes)"
            + (f" saved to {a['saved_to']}" if "saved_to" in a else "")
            for a in listed
        ]
    return ToolOutput(data=MailMessage.from_fields(data), text="\n".join(lines))


def _save(store: MailStore, folder: WorldPath, filename: str, content: bytes) -> str:
    """Write an attachment into ``folder`` without overwriting (each name tried with an
    exclusive create through the folder's descriptor); returns its virtual path."""
    from mcp_servers._core import validate_id

    safe = re.sub(r"[\\/\x00-\x1f]", "_", filename).strip(" .") or "attachment"
    safe = validate_id(safe[:200], argument="save_attachments_to")
    folder.mkdir(parents=True, exist_ok=True)
    stem, dot, suffix = safe.rpartition(".")
    if not dot:
        stem, suffix = safe, ""
    candidate = folder.child(safe)
    for counter in range(1, 10_000):
        try:
            candidate.create(content)
            return candidate.virtual
        except ToolError as exc:
            if exc.code != "already_exists":
                raise
        candidate = folder.child(f"{stem} ({counter}).{suffix}" if suffix else f"{stem} ({counter})")
    raise ToolError(
        ErrorCode.conflict,
        f"save_attachments_to: too many files named {safe!r}",
        argument="save_attachments_to",
    )


def _parse_when(value: str, argument: str) -> datetime:
    """``YYYY-MM-DD`` (start of that day, UTC) or ISO 8601 (naive = UTC) -> aware datetime."""
    text = value.strip()
    try:
        if _DATE_ONLY.match(text):
            return datetime.combine(datetime.strptime(text, "%Y-%m-%d").date(), time.min, tzinfo=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {value[:40]!r} is not a date (use YYYY-MM-DD or ISO 8601)",
            argument=argument,
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@SERVER.tool(action="search", read_only=True)
def search_mail(
    store: MailStore,
    from_email: str | None = None,
    to_email: str | None = None,
    subject: str | None = None,
    body: str | None = None,
    query: str | None = None,
    after_date: str | None = None,
    before_date: str | None = None,
    thread_id: str | None = None,
    has_attachments: bool | None = None,
    label: str | None = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 50,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> ToolOutput[MailPage]:
    """Search messages (newest first). Text filters are case-insensitive substrings; all given filters must match.

    Args:
        from_email: part of the sender (address or name).
        to_email: part of a To or Cc recipient.
        subject: part of the subject.
        body: part of the body text.
        query: part of the subject, sender, recipients or body.
        after_date: on or after this date ("YYYY-MM-DD" = from the start of that day, UTC) or ISO date-time.
        before_date: strictly before this date ("YYYY-MM-DD" = before that day starts, UTC) or ISO date-time.
        thread_id: only messages of this thread (as shown in thread_id fields).
        has_attachments: only messages with (true) or without (false) attachments.
        label: only messages with this Gmail label (e.g. "Sent", "Inbox", "Important"; case-insensitive).
        limit: how many messages to return (1-100).
        offset: how many matches to skip (for the next page).
    """
    after = _parse_when(after_date, "after_date") if after_date else None
    before = _parse_when(before_date, "before_date") if before_date else None
    if after and before and after >= before:
        raise ToolError(
            ErrorCode.invalid_argument, "after_date: must be earlier than before_date", argument="after_date"
        )
    view = store.view()
    sender = from_email.strip().lower() if from_email else None
    recipient = to_email.strip().lower() if to_email else None
    topic = subject.strip().lower() if subject else None
    text = body.strip().lower() if body else None
    anything = query.strip().lower() if query else None
    thread = normalize_id(thread_id).lower() if thread_id else None
    start = after.timestamp() if after else None
    stop = before.timestamp() if before else None
    in_body = store.body_matches(view, text) if text else None
    anywhere = store.body_matches(view, anything) if anything else None
    # Text filters select positions through joined per-field strings (C-level find);
    # the remaining filters are one list comprehension each over what is left.
    selected: set[int] | None = None
    for field_name, needle in (("subject_l", topic), ("sender_l", sender), ("recipients_l", recipient)):
        if needle:
            found = view.field_matches(field_name, needle)
            selected = found if selected is None else selected & found
    if in_body is not None:
        found = view.keys_of(in_body)
        selected = found if selected is None else selected & found
    if anything:
        found = (
            view.field_matches("subject_l", anything)
            | view.field_matches("sender_l", anything)
            | view.field_matches("recipients_l", anything)
            | view.keys_of(anywhere or set())
        )
        selected = found if selected is None else selected & found
    matches = view.entries if selected is None else [view.entries[i] for i in sorted(selected)]
    if thread:
        matches = [e for e in matches if e.thread_id.lower() == thread]
    if has_attachments is not None:
        matches = [e for e in matches if e.has_attachments == has_attachments]
    if label and label.strip():
        wanted = label.strip().lower()
        matches = [e for e in matches if any(wanted == name.lower() for name in e.labels)]
    if start is not None:
        matches = [e for e in matches if e.timestamp is not None and e.timestamp >= start]
    if stop is not None:
        matches = [e for e in matches if e.timestamp is not None and e.timestamp < stop]
    page = matches[offset : offset + limit]
    data: dict[str, Any] = {
        "mails": [summary(store, entry) for entry in page],
        "total": len(matches),
        "offset": offset,
        "limit": limit,
        "has_more": offset + len(page) < len(matches),
    }
    notices = store.notices(view)
    if notices:
        data["notices"] = notices
    return ToolOutput(data=MailPage.from_fields(data), text=page_text("Matches", data))
