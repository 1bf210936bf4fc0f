"""The index of one mbox file: a summary of every message, built by one pass over the file.

Only headers are parsed (with a small parser of our own, ~10x faster than the email
package); bodies are read on demand. A message without readable headers is skipped and
recorded as a :class:`Problem`; one with a broken Date is kept (no date) and recorded too.

A content is indexed once per process (``_BY_CONTENT``, an
:class:`atoll.content_cache.ContentCache` keyed by the sha256 of the file's bytes and its display
name): every trial's world is a new copy of its seed, whose mailboxes would otherwise be parsed
again for every trial, and the grader reads the seed's mailboxes again for
every trial too. Each caller gets an index of its own (its entries name its own file; bodies
found by its searches stay in it), so nothing one world does is seen by another.
"""

from __future__ import annotations

import dataclasses
import hashlib
import mmap
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from atoll.content_cache import ContentCache
from atoll.formats.mail.headers import (
    addresses,
    all_ids,
    bare_addresses,
    first_id,
    normalize_id,
    parse_date,
    parse_header_block,
    split_header,
)
from atoll.formats.mail.mbox import Span, message_bytes, split_spans

BCC_HEADER = "x-atoll-bcc"
#: The header fields the index keeps (others are skipped undecoded).
INDEXED_FIELDS = frozenset(
    {
        "from",
        "to",
        "cc",
        "subject",
        "date",
        "message-id",
        "in-reply-to",
        "references",
        "x-gm-thrid",
        "x-gmail-labels",
        BCC_HEADER,
    }
)
_ATTACHMENT = re.compile(rb"(?im)^content-disposition:[ \t]*attachment")
# Anything but whitespace (bytes.strip()'s), searched in place: the preamble may be the mapped file.
_NOT_SPACE = re.compile(rb"\S")


@dataclass(slots=True)
class MailEntry:
    """One message as listed and searched (no body)."""

    mail_id: str
    key: str
    file: Path
    span: Span
    order: int
    sender: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    date: datetime | None
    date_header: str
    in_reply_to: str | None
    references: list[str]
    thread_id: str
    labels: list[str]
    has_attachments: bool
    timestamp: float | None = None
    sender_l: str = ""
    recipients_l: str = ""
    subject_l: str = ""


@dataclass(frozen=True)
class Problem:
    """Something wrong with one stored message, reported once."""

    file: str
    message_number: int
    byte_offset: int
    description: str

    def text(self) -> str:
        return f"{self.file}: message #{self.message_number} (byte {self.byte_offset}): {self.description}"


@dataclass
class MailIndex:
    """Entries of one mbox file in file order, plus the problems found."""

    path: Path
    entries: list[MailEntry]
    problems: list[Problem]
    #: lower-cased body text by span start, filled lazily by body searches
    bodies: dict[int, str] = field(default_factory=dict)
    #: all bodies joined with NUL separators, and where each entry's body starts in it
    body_blob: tuple[bytes, list[int]] | None = None

    def with_appended(self, entry: MailEntry) -> MailIndex:
        """A new index with one more message at the end (after our own append)."""
        return MailIndex(self.path, [*self.entries, entry], self.problems, self.bodies)

    def _own_copy(self, path: Path) -> MailIndex:
        """This index for the file at ``path``: entries naming it, empty lazy caches."""
        if all(entry.file == path for entry in self.entries):
            entries = list(self.entries)  # entries are never changed in place: shared
        else:
            entries = [dataclasses.replace(entry, file=path) for entry in self.entries]
        return MailIndex(path, entries, list(self.problems))


#: (sha256 of an mbox's bytes, its display name) -> its index, as first built; never handed out
#: itself (:meth:`MailIndex._own_copy`). Bounded in files and in messages.
_BY_CONTENT: ContentCache[MailIndex] = ContentCache(
    max_entries=64, max_weight=200_000, weigh=lambda index: len(index.entries)
)


def build_index(handle: BinaryIO, path: Path, display_name: str) -> MailIndex:
    """Index the mbox open as ``handle`` (closed here; ``path`` is its name in the index):
    one read, headers only."""
    with handle:
        size = os.fstat(handle.fileno()).st_size
        # mmap: a multi-GB Takeout export is scanned without being copied into memory.
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        try:
            return _index_bytes(path, display_name, data)
        finally:
            if isinstance(data, mmap.mmap):
                data.close()


def read_index(data: bytes, name: str) -> MailIndex:
    """Index the bytes of an mbox file (``name`` is how it is named in the index and its
    problems); what :func:`build_index` gives for the same file."""
    return _index_bytes(Path(name), name, data)


def _index_bytes(path: Path, display_name: str, data: bytes | mmap.mmap) -> MailIndex:
    """The index of ``data`` for the file at ``path``: built once per content (module doc)."""
    built = _BY_CONTENT.get(data, display_name, lambda: _parse_index(path, display_name, data))
    return built._own_copy(path)


def _parse_index(path: Path, display_name: str, data: bytes | mmap.mmap) -> MailIndex:
    spans, preamble = split_spans(data)
    entries: list[MailEntry] = []
    problems: list[Problem] = []
    if _NOT_SPACE.search(preamble):
        problems.append(Problem(display_name, 0, 0, "text before the first 'From ' line ignored"))
    for number, span in enumerate(spans, 1):
        raw = message_bytes(data[span.start : span.end])
        entry, problem = make_entry(raw, path, span, number, display_name)
        if problem is not None:
            problems.append(problem)
        if entry is not None:
            entries.append(entry)
    return MailIndex(path, entries, problems)


def make_entry(
    raw: bytes, path: Path, span: Span, number: int, display_name: str
) -> tuple[MailEntry | None, Problem | None]:
    """The entry for one message's bytes, and the problem with it if any."""
    header, _ = split_header(raw)
    fields, bad_lines = parse_header_block(header, INDEXED_FIELDS)
    if not fields:
        return None, Problem(display_name, number, span.start, "no readable headers; message skipped")
    issues = []
    if bad_lines:
        issues.append(f"{bad_lines} malformed header line(s) ignored")
    if not header.isascii():
        try:
            header.decode("utf-8")
        except UnicodeDecodeError:
            issues.append("header bytes are not UTF-8 (read as Windows-1252)")
    date = parse_date(fields.get("date"))
    if fields.get("date") and date is None:
        issues.append(f"unreadable Date {fields['date'][:60]!r}; shown without a date")
    problem = Problem(display_name, number, span.start, "; ".join(issues)) if issues else None
    message_id = normalize_id(fields.get("message-id"))
    if not message_id:
        message_id = synthetic_id(raw)
    references = all_ids(fields.get("references"))
    in_reply_to = first_id(fields.get("in-reply-to"))
    thread_id = (
        fields.get("x-gm-thrid") or (references[0] if references else None) or in_reply_to or message_id
    )
    to = addresses(fields.get("to"))
    cc = addresses(fields.get("cc"))
    sender = fields.get("from", "")
    subject = fields.get("subject", "")
    entry = MailEntry(
        mail_id=f"<{message_id}>",
        key=message_id,
        file=path,
        span=span,
        order=number,
        sender=sender,
        to=to,
        cc=cc,
        bcc=addresses(fields.get(BCC_HEADER)),
        subject=subject,
        date=date,
        date_header=fields.get("date", ""),
        in_reply_to=in_reply_to,
        references=references,
        thread_id=normalize_id(thread_id),
        labels=[label.strip() for label in fields.get("x-gmail-labels", "").split(",") if label.strip()],
        has_attachments=bool(_ATTACHMENT.search(raw)),
        timestamp=date.timestamp() if date else None,
        sender_l=sender.lower(),
        recipients_l=" ".join(to + cc).lower(),
        subject_l=subject.lower(),
    )
    return entry, problem


def synthetic_id(raw: bytes) -> str:
    """The stable id given to a message without a Message-ID (from its bytes)."""
    return hashlib.sha1(raw).hexdigest()[:24] + "@atoll.invalid"


def involves(entry: MailEntry, email: str) -> bool:
    """Whether ``email`` is the sender or a visible recipient of the message."""
    email = email.lower()
    return email in bare_addresses(entry.sender) or email in bare_addresses(entry.to + entry.cc)
