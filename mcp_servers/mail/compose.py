"""Building outgoing messages: recipients, threading headers, bodies, real attachments.

Bcc recipients are never written as a ``Bcc:`` header (every reader of the stored
message would see them). The sender's copy keeps them in the private header
``X-Atoll-Bcc``, which the mail server shows only to the world's user when they are the
sender, and which reply-all never uses.
"""

from __future__ import annotations

import contextlib
import json
import mimetypes
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default as default_policy
from email.utils import format_datetime, getaddresses, make_msgid

from atoll.errors import ErrorCode
from atoll.formats.mail.headers import display_address
from atoll.formats.mail.text import html_to_text
from mcp_servers._core import ServerContext, ToolError

BCC_HEADER = "X-Atoll-Bcc"
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
_ADDRESS = re.compile(r"^[^@\s<>(),;:\"]+@[^@\s<>(),;:\"]+$")


@dataclass
class Outgoing:
    """What the tool layer decided to send."""

    sender: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    body: str
    body_format: str = "plain"
    attachments: list[tuple[str, bytes, str]] | None = None  # (filename, data, mime type)
    in_reply_to: str | None = None
    references: list[str] | None = None
    thread_header: str | None = None


def parse_recipients(value: str | list[str] | None, argument: str) -> list[str]:
    """Recipients as display strings (``Name <a@x>`` or ``a@x``); refuses non-addresses.

    Accepts one string with commas/semicolons, or a list.
    """
    if value is None:
        return []
    if isinstance(value, str) and value.strip().startswith("["):  # a JSON list sent as text
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    items = value if isinstance(value, list) else [value]
    result: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{argument}: expected email addresses, got {item!r}",
                argument=argument,
            )
        for name, address in getaddresses([item.replace(";", ",")]):
            address = address.strip()
            if not address and not name.strip():
                continue
            if not _ADDRESS.match(address):
                shown = (name or address or item)[:80]
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"{argument}: {shown!r} is not an email address",
                    argument=argument,
                )
            if address.lower() in seen:
                continue
            seen.add(address.lower())
            result.append(display_address(name, address) if name else address)
    return result


def address_of(display: str) -> str:
    pairs = getaddresses([display])
    return pairs[0][1].lower() if pairs and pairs[0][1] else display.strip().lower()


def without(recipients: list[str], *excluded: list[str] | str | None) -> list[str]:
    """``recipients`` minus any address in ``excluded`` (case-insensitive)."""
    drop: set[str] = set()
    for group in excluded:
        if group:
            for item in [group] if isinstance(group, str) else group:
                drop.add(address_of(item))
    return [r for r in recipients if address_of(r) not in drop]


def resolve_sender(ctx: ServerContext, from_email: str | None) -> str:
    """The From value: ``from_email`` or the world's user (with their name when known)."""
    if from_email and from_email.strip():
        parsed = parse_recipients(from_email, "from_email")
        if len(parsed) != 1:
            raise ToolError(
                ErrorCode.invalid_argument, "from_email: give exactly one address", argument="from_email"
            )
        sender = parsed[0]
        if (
            "<" not in sender
            and ctx.user_email
            and ctx.user_name
            and sender.lower() == ctx.user_email.lower()
        ):
            sender = display_address(ctx.user_name, sender)
        return sender
    if not ctx.user_email:
        raise ToolError(
            ErrorCode.invalid_argument,
            "from_email: required (no user_email configured for this world)",
            argument="from_email",
        )
    return display_address(ctx.user_name, ctx.user_email) if ctx.user_name else ctx.user_email


def load_attachments(ctx: ServerContext, paths: list[str] | None) -> list[tuple[str, bytes, str]]:
    """Read attachment files from the filesystem root (virtual paths); refuses >25 MB in total."""
    result: list[tuple[str, bytes, str]] = []
    total = 0
    for value in paths or []:
        path = ctx.files.at(value, argument="attachments", allow_root=False)
        with path.open() as handle:
            total += os.fstat(handle.fileno()).st_size
            if total > MAX_ATTACHMENT_BYTES:
                raise ToolError(
                    ErrorCode.too_large,
                    f"attachments: more than {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MB in total",
                    argument="attachments",
                )
            data = handle.read()
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        result.append((path.name, data, mime))
    return result


def build_message(outgoing: Outgoing) -> EmailMessage:
    """An RFC 2822 message with Message-ID, Date and threading headers."""
    if not outgoing.to and not outgoing.cc and not outgoing.bcc:
        raise ToolError(
            ErrorCode.invalid_argument, "to_email: at least one recipient is needed", argument="to_email"
        )
    message = EmailMessage(policy=default_policy)
    message["From"] = outgoing.sender
    if outgoing.to:
        message["To"] = ", ".join(outgoing.to)
    if outgoing.cc:
        message["Cc"] = ", ".join(outgoing.cc)
    message["Subject"] = outgoing.subject
    message["Date"] = format_datetime(datetime.now(UTC))
    domain = address_of(outgoing.sender).rpartition("@")[2] or "atoll.local"
    message["Message-ID"] = make_msgid(domain=domain)
    if outgoing.in_reply_to:
        message["In-Reply-To"] = f"<{outgoing.in_reply_to}>"
    if outgoing.references:
        message["References"] = " ".join(f"<{ref}>" for ref in outgoing.references)
    if outgoing.thread_header:
        message["X-GM-THRID"] = outgoing.thread_header
    message["X-Gmail-Labels"] = "Sent"
    if outgoing.bcc:
        message[BCC_HEADER] = ", ".join(outgoing.bcc)
    if outgoing.body_format == "html":
        message.set_content(html_to_text(outgoing.body))
        message.add_alternative(outgoing.body, subtype="html")
    else:
        message.set_content(outgoing.body)
    for filename, data, mime in outgoing.attachments or []:
        maintype, _, subtype = mime.partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype or "octet-stream", filename=filename)
    return message


def prefixed(subject: str, prefix: str) -> str:
    """``Re: x`` / ``Fwd: x`` without doubling an existing prefix."""
    stripped = subject.strip()
    aliases = {"Re:": ("re:", "aw:", "sv:"), "Fwd:": ("fwd:", "fw:", "wg:")}[prefix]
    if stripped.lower().startswith(aliases):
        return stripped
    return f"{prefix} {stripped}" if stripped else prefix
