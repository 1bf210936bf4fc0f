"""Write a Google-Takeout-style mbox (threads, Cc, forwards, non-ASCII names, HTML bodies).

A message spec is a dict: ``key`` (unique, becomes the Message-ID local part), ``sender``
and ``to``/``cc`` (people: dicts with ``name`` and ``email``), ``date`` (aware datetime),
``subject``, ``body`` (plain text), optional ``html`` (adds a text/html alternative),
``reply_to`` (key of the message answered: sets In-Reply-To/References), ``attachment``
(``(file_name, bytes, mime type)``) and ``labels`` (Gmail labels header).
"""

from __future__ import annotations

import email.policy
import hashlib
import mailbox
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

_POLICY = email.policy.default.clone(linesep="\n")


def message_id(key: str, domain: str) -> str:
    """The Message-ID the sample gives the message with ``key``."""
    return f"<{key}@{domain}>"


def write_mbox(path: Path, messages: list[dict[str, Any]], *, domain: str, user_email: str) -> None:
    """Write ``messages`` (in the given order) to the mbox at ``path`` (replaced).

    As in a Gmail Takeout, each message carries ``X-GM-THRID`` (one id per thread) and
    ``X-Gmail-Labels`` (``Sent`` for the user's own mail, else ``Inbox,Opened``, unless the
    spec gives ``labels``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    by_key = {spec["key"]: spec for spec in messages}
    box = mailbox.mbox(path, create=True)
    box.lock()
    try:
        for spec in messages:
            built = _build(spec, by_key, domain, user_email)
            entry = mailbox.mboxMessage(built.as_bytes(policy=_POLICY))
            entry.set_from(spec["sender"]["email"], spec["date"].astimezone().utctimetuple())
            box.add(entry)
        box.flush()
    finally:
        box.unlock()
        box.close()


def _address(person: dict[str, str]) -> Address:
    username, _, host = person["email"].partition("@")
    return Address(display_name=person["name"], username=username, domain=host)


def _thread_id(spec: dict[str, Any], by_key: dict[str, dict[str, Any]]) -> str:
    root = spec
    while root.get("reply_to"):
        root = by_key[root["reply_to"]]
    return str(int.from_bytes(hashlib.sha256(root["key"].encode()).digest()[:8]) >> 4)


def _build(
    spec: dict[str, Any], by_key: dict[str, dict[str, Any]], domain: str, user_email: str
) -> EmailMessage:
    message = EmailMessage(policy=_POLICY)
    message["From"] = _address(spec["sender"])
    message["To"] = [_address(p) for p in spec["to"]]
    if spec.get("cc"):
        message["Cc"] = [_address(p) for p in spec["cc"]]
    message["Subject"] = spec["subject"]
    message["Date"] = format_datetime(spec["date"])
    message["Message-ID"] = message_id(spec["key"], domain)
    if spec.get("reply_to"):
        chain: list[str] = []
        parent = by_key[spec["reply_to"]]
        while parent is not None:
            chain.insert(0, message_id(parent["key"], domain))
            parent = by_key.get(parent.get("reply_to") or "")
        message["In-Reply-To"] = chain[-1]
        message["References"] = " ".join(chain)
    message["X-GM-THRID"] = _thread_id(spec, by_key)
    default_labels = ["Sent"] if spec["sender"]["email"] == user_email else ["Inbox", "Opened"]
    message["X-Gmail-Labels"] = ",".join(spec.get("labels") or default_labels)
    message.set_content(spec["body"])
    if spec.get("html"):
        message.add_alternative(spec["html"], subtype="html")
    if spec.get("attachment"):
        file_name, data, mime = spec["attachment"]
        maintype, subtype = mime.split("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=file_name)
    # The email package draws MIME boundaries at random; fixed ones keep the mbox byte-stable.
    for number, part in enumerate(message.walk()):
        if part.is_multipart():
            part.set_boundary(f"=_atoll_{spec['key']}_{number}")
    return message
