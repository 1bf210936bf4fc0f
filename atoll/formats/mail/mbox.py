"""The mbox file format: finding messages, reading one, appending one.

Message boundaries follow Python's :mod:`mailbox` (a ``From `` line starts a message; the
blank line before it belongs to no message), except that a separator must look like one
(``From sender date``), so a body line "From now on" that a careless writer left unquoted
does not split a message. What we write round-trips through ``mailbox.mbox``. Bodies are written with ``From `` lines quoted as
``>From `` (mboxo), like Python's own writer.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import re
import time
from dataclasses import dataclass
from email.generator import BytesGenerator
from email.message import Message
from io import BytesIO
from typing import BinaryIO

from atoll.errors import CodedError, ErrorCode

# A separator line is "From <sender> <asctime date>"; requiring the time of day keeps an
# unquoted body line such as "From now on ..." (common in real exports) inside its message.
_FROM_LINE = re.compile(rb"^From \S+ [^\n]*?\d{1,2}:\d{2}", re.MULTILINE)


@dataclass(frozen=True)
class Span:
    """Where one message lives in the file: ``start`` (its ``From `` line) to ``end``."""

    start: int
    end: int


def split_spans(data: bytes | mmap.mmap) -> tuple[list[Span], bytes | mmap.mmap]:
    """Message spans of an mbox file's bytes, plus any junk before the first ``From `` line
    (``data`` itself when there is no such line: a mapped file is not copied)."""
    starts = [match.start() for match in _FROM_LINE.finditer(data)]
    preamble = data[: starts[0]] if starts else data
    spans = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(data)
        spans.append(Span(start, end))
    return spans, preamble


def message_bytes(raw: bytes) -> bytes:
    """The RFC 2822 message inside a span: without the ``From `` line and the separator line."""
    newline = raw.find(b"\n")
    body = raw[newline + 1 :] if newline >= 0 else b""
    if body.endswith(b"\r\n\r\n"):
        return body[:-2]
    if body.endswith(b"\n\n"):
        return body[:-1]
    return body


class StaleSpan(CodedError):
    """The file no longer has a message where the index says (it was replaced meanwhile)."""

    code = ErrorCode.stale_mail_span


def read_span(handle: BinaryIO, span: Span, name: str) -> bytes:
    """The message bytes at ``span`` of the open mbox ``handle`` (closed here); raises
    StaleSpan when no message starts there any more."""
    with handle:
        handle.seek(span.start)
        chunk = handle.read(span.end - span.start)
    if not chunk.startswith(b"From "):
        raise StaleSpan(f"{name}: no message at byte {span.start}")
    return message_bytes(chunk)


def render_message(message: Message) -> bytes:
    """RFC 2822 bytes with LF line ends and ``From `` lines in the body quoted."""
    out = BytesIO()
    BytesGenerator(out, mangle_from_=True, policy=message.policy.clone(linesep="\n")).flatten(message)
    data = out.getvalue()
    return data if data.endswith(b"\n") else data + b"\n"


def from_line(sender: str, when: float | None = None) -> bytes:
    """The mbox separator line, e.g. ``From alice@example.com Mon Mar  4 10:00:00 2024``."""
    address = "".join(ch for ch in sender if not ch.isspace()) or "MAILER-DAEMON"
    return f"From {address} {time.asctime(time.gmtime(when))}\n".encode("ascii", "replace")


def append_message(handle: BinaryIO, sender: str, data: bytes) -> Span:
    """Append one message (already rendered) to the mbox open as ``handle`` (read and
    append; closed here); returns its span.

    The caller holds the writer lock (:func:`mcp_servers._core.file_lock`); we also take a
    POSIX lock on the file so other mbox writers that use ``lockf`` (Python's mailbox) wait.
    """
    with handle:
        fcntl.lockf(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            prefix = b""
            if size:
                handle.seek(max(0, size - 2))
                tail = handle.read()
                if not tail.endswith(b"\n"):
                    prefix = b"\n\n"
                elif not tail.endswith(b"\n\n"):
                    prefix = b"\n"
            start = size + len(prefix)
            payload = prefix + from_line(sender) + data + b"\n"
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.lockf(handle, fcntl.LOCK_UN)
    return Span(start, size + len(payload))
