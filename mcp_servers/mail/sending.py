"""Sending tools: send_mail, reply_mail, reply_all_mail, forward_mail.

Every sent message is appended to the user's mbox as an RFC 2822 message that Python's
``mailbox`` and ``email`` parsers read back (Message-ID, Date, threading headers, real
MIME attachments read from the filesystem root).
"""

from __future__ import annotations

from typing import Literal

from atoll.errors import ErrorCode
from atoll.formats.mail.headers import addresses, all_ids, normalize_id, parse_header_block, split_header
from atoll.formats.mail.index import MailEntry
from atoll.formats.mail.text import attachments_of, message_text
from mcp_servers._core import ToolError, ToolOutput
from mcp_servers.mail.compose import (
    Outgoing,
    address_of,
    build_message,
    load_attachments,
    parse_recipients,
    prefixed,
    resolve_sender,
    without,
)
from mcp_servers.mail.results import SentMail
from mcp_servers.mail.server import SERVER
from mcp_servers.mail.store import MailStore, MailView
from mcp_servers.mail.views import iso, summary

BodyFormat = Literal["plain", "html"]
Recipients = str | list[str]


def _send(store: MailStore, outgoing: Outgoing, verb: str) -> ToolOutput[SentMail]:
    message = build_message(outgoing)
    entry = store.append(message, address_of(outgoing.sender))
    data = summary(store, entry)
    data["bcc"] = outgoing.bcc
    data["attachments"] = [name for name, _, _ in outgoing.attachments or []]
    recipients = ", ".join(outgoing.to + outgoing.cc + outgoing.bcc)
    clip = f" with {len(data['attachments'])} attachment(s)" if data["attachments"] else ""
    text = (
        f"{verb} {entry.mail_id} to {recipients}{clip}. Subject: {entry.subject}. Thread: {entry.thread_id}"
    )
    return ToolOutput(data=SentMail.from_fields(data), text=text)


def thread_headers(store: MailStore, original: MailEntry) -> tuple[str, list[str], str | None]:
    """(in_reply_to, references, X-GM-THRID) for a message answering ``original``."""
    references = list(original.references)
    if not references and original.in_reply_to:
        references = [original.in_reply_to]
    fields, _ = parse_header_block(split_header(store.raw(original))[0])
    return original.key, [*references, original.key], fields.get("x-gm-thrid")


def _latest_in_thread(view: MailView, thread_id: str) -> MailEntry:
    key = normalize_id(thread_id).lower()
    for entry in view.entries:  # newest first
        if entry.thread_id.lower() == key:
            return entry
    raise ToolError(ErrorCode.not_found, f"thread_id: no thread {thread_id[:120]!r}", argument="thread_id")


@SERVER.tool(action="send")
def send_mail(
    store: MailStore,
    to_email: Recipients,
    subject: str,
    body: str,
    from_email: str | None = None,
    cc: Recipients | None = None,
    bcc: Recipients | None = None,
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
    thread_id: str | None = None,
    in_reply_to: str | None = None,
    references: str | list[str] | None = None,
) -> ToolOutput[SentMail]:
    """Send an email (it is stored in the user's mailbox). Bcc recipients stay hidden from the others.

    Args:
        to_email: recipient address, comma-separated addresses, or a list of addresses.
        subject: the subject line.
        body: the message text (HTML when body_format is "html").
        from_email: sender address; defaults to the world's user.
        cc: Cc recipients (same forms as to_email).
        bcc: Bcc recipients (not visible to the other recipients).
        attachments: files of the world to attach, e.g. ["/Reports/q3.pdf"].
        body_format: "plain" or "html".
        thread_id: continue this thread (replies to its latest message).
        in_reply_to: mail id this message answers.
        references: mail ids of the thread, oldest first.
    """
    view = store.view()
    parent_id: str | None = normalize_id(in_reply_to) or None
    refs = [normalize_id(r) for r in (references if isinstance(references, list) else all_ids(references))]
    thread_header = None
    parent = view.find(parent_id) if parent_id else None
    if parent is None and thread_id:
        parent = _latest_in_thread(view, thread_id)
    if parent is not None:
        parent_id, parent_refs, thread_header = thread_headers(store, parent)
        refs = refs or parent_refs
    outgoing = Outgoing(
        sender=resolve_sender(store.ctx, from_email),
        to=parse_recipients(to_email, "to_email"),
        cc=parse_recipients(cc, "cc"),
        bcc=parse_recipients(bcc, "bcc"),
        subject=subject,
        body=body,
        body_format=body_format,
        attachments=load_attachments(store.ctx, attachments),
        in_reply_to=parent_id,
        references=[r for r in refs if r] or ([parent_id] if parent_id else None),
        thread_header=thread_header,
    )
    return _send(store, outgoing, "Sent")


def _reply(
    store: MailStore,
    original_mail_id: str,
    body: str,
    *,
    everyone: bool,
    from_email: str | None,
    cc: Recipients | None,
    bcc: Recipients | None,
    attachments: list[str] | None,
    body_format: str,
) -> ToolOutput[SentMail]:
    view = store.view()
    original = store.get(view, original_mail_id, "original_mail_id")
    sender = resolve_sender(store.ctx, from_email)
    fields, _ = parse_header_block(split_header(store.raw(original))[0])
    reply_to = addresses(fields.get("reply-to")) or addresses(original.sender)
    me = [sender, store.ctx.user_email or ""]
    # Answering our own message means writing to its recipients again.
    to = list(original.to) if store.is_own(original) else reply_to + (original.to if everyone else [])
    extra_cc = parse_recipients(cc, "cc")
    copy = (original.cc if everyone else []) + extra_cc
    to = _unique(without(to, *me))
    copy = _unique(without(copy, *me, to))
    if not to and not copy:
        to = _unique(reply_to)
    in_reply_to, refs, thread_header = thread_headers(store, original)
    outgoing = Outgoing(
        sender=sender,
        to=to,
        cc=copy,
        bcc=parse_recipients(bcc, "bcc"),
        subject=prefixed(original.subject, "Re:"),
        body=body,
        body_format=body_format,
        attachments=load_attachments(store.ctx, attachments),
        in_reply_to=in_reply_to,
        references=refs,
        thread_header=thread_header,
    )
    return _send(store, outgoing, "Replied with" if not everyone else "Replied to all with")


def _unique(recipients: list[str]) -> list[str]:
    seen: set[str] = set()
    result = []
    for recipient in recipients:
        key = address_of(recipient)
        if key and key not in seen:
            seen.add(key)
            result.append(recipient)
    return result


@SERVER.tool(action="reply")
def reply_mail(
    store: MailStore,
    original_mail_id: str,
    body: str,
    from_email: str | None = None,
    cc: Recipients | None = None,
    bcc: Recipients | None = None,
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
) -> ToolOutput[SentMail]:
    """Reply to the sender of a message ("Re:" subject, same thread).

    Args:
        original_mail_id: id of the message to answer.
        body: the reply text.
        from_email: sender address; defaults to the world's user.
        cc: extra Cc recipients.
        bcc: Bcc recipients.
        attachments: files of the world to attach, e.g. ["/Reports/q3.pdf"].
        body_format: "plain" or "html".
    """
    return _reply(
        store,
        original_mail_id,
        body,
        everyone=False,
        from_email=from_email,
        cc=cc,
        bcc=bcc,
        attachments=attachments,
        body_format=body_format,
    )


@SERVER.tool(action="reply_all")
def reply_all_mail(
    store: MailStore,
    original_mail_id: str,
    body: str,
    from_email: str | None = None,
    cc: Recipients | None = None,
    bcc: Recipients | None = None,
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
) -> ToolOutput[SentMail]:
    """Reply to the sender and all visible recipients of a message (never to its Bcc).

    Args:
        original_mail_id: id of the message to answer.
        body: the reply text.
        from_email: sender address; defaults to the world's user.
        cc: extra Cc recipients.
        bcc: Bcc recipients.
        attachments: files of the world to attach, e.g. ["/Reports/q3.pdf"].
        body_format: "plain" or "html".
    """
    return _reply(
        store,
        original_mail_id,
        body,
        everyone=True,
        from_email=from_email,
        cc=cc,
        bcc=bcc,
        attachments=attachments,
        body_format=body_format,
    )


@SERVER.tool(action="forward")
def forward_mail(
    store: MailStore,
    original_mail_id: str,
    to_email: Recipients,
    body: str = "",
    from_email: str | None = None,
    cc: Recipients | None = None,
    bcc: Recipients | None = None,
    attachments: list[str] | None = None,
    include_attachments: bool = True,
    body_format: BodyFormat = "plain",
) -> ToolOutput[SentMail]:
    """Forward a message ("Fwd:" subject) with its text and, by default, its attachments.

    Args:
        original_mail_id: id of the message to forward.
        to_email: recipient address(es).
        body: your note above the forwarded message.
        from_email: sender address; defaults to the world's user.
        cc: Cc recipients.
        bcc: Bcc recipients.
        attachments: extra files of the world to attach.
        include_attachments: also attach the original message's attachments.
        body_format: "plain" or "html" (for your note).
    """
    view = store.view()
    original = store.get(view, original_mail_id, "original_mail_id")
    raw = store.raw(original)
    quoted, _ = message_text(raw)
    header = [
        "---------- Forwarded message ---------",
        f"From: {original.sender}",
        f"Date: {iso(original) or original.date_header}",
        f"Subject: {original.subject}",
        f"To: {', '.join(original.to)}",
        *([f"Cc: {', '.join(original.cc)}"] if original.cc else []),
    ]
    if body_format == "html":
        from html import escape

        forwarded = (
            "<br>".join(escape(line) for line in header) + "<br><br>" + escape(quoted).replace("\n", "<br>")
        )
        full_body = f"{body}<br><br>{forwarded}"
    else:
        full_body = f"{body}\n\n" + "\n".join(header) + "\n\n" + quoted
    files = load_attachments(store.ctx, attachments)
    if include_attachments:
        files = [(a.filename, a.data, a.content_type) for a in attachments_of(raw)] + files
    in_reply_to, refs, thread_header = thread_headers(store, original)
    outgoing = Outgoing(
        sender=resolve_sender(store.ctx, from_email),
        to=parse_recipients(to_email, "to_email"),
        cc=parse_recipients(cc, "cc"),
        bcc=parse_recipients(bcc, "bcc"),
        subject=prefixed(original.subject, "Fwd:"),
        body=full_body,
        body_format=body_format,
        attachments=files,
        references=refs,
        thread_header=thread_header,
    )
    return _send(store, outgoing, "Forwarded as")
