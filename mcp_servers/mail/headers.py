"""Decoding header values safely: RFC 2047 words, raw 8-bit (non-UTF-8) bytes, addresses, dates."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.utils import getaddresses, parsedate_to_datetime

_HEADER_LINE = re.compile(rb"^([!-9;-~]+)[ \t]*:[ \t]?(.*)$")


def decode_bytes(raw: bytes) -> str:
    """Bytes from a header or body in an unknown charset: UTF-8, else Windows-1252."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def decode_value(value: str) -> str:
    """An RFC 2047-encoded header value as text (``=?utf-8?q?caf=C3=A9?=`` -> ``café``)."""
    if "=?" not in value:
        return " ".join(value.split())
    try:
        return " ".join(str(make_header(decode_header(value))).split())
    except (LookupError, ValueError, UnicodeError, AssertionError, TypeError):
        parts = []
        for chunk, charset in decode_header(value):
            if isinstance(chunk, bytes):
                try:
                    parts.append(chunk.decode(charset or "utf-8", errors="replace"))
                except LookupError:
                    parts.append(decode_bytes(chunk))
            else:
                parts.append(chunk)
        return " ".join("".join(parts).split())


def parse_header_block(block: bytes, wanted: frozenset[str] | None = None) -> tuple[dict[str, str], int]:
    """Header fields of a message's header block (lower-case names, first occurrence kept,
    values decoded), and how many lines were not headers (0 for a well-formed block).

    With ``wanted``, only those fields are decoded and returned (the index skips the dozens
    of Received/DKIM lines a real message carries).
    """
    fields: dict[str, str] = {}
    bad_lines = 0
    name: str | None = None
    value_parts: list[bytes] = []

    def flush() -> None:
        if name is not None and name not in fields and (wanted is None or name in wanted):
            fields[name] = decode_value(decode_bytes(b" ".join(value_parts)))

    for line in block.split(b"\n"):
        line = line.rstrip(b"\r")
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):
            if name is not None:
                value_parts.append(line.strip())
            continue
        match = _HEADER_LINE.match(line)
        if match is None:
            bad_lines += 1
            continue
        flush()
        name = match.group(1).decode("ascii").lower()
        value_parts = [match.group(2).strip()]
    flush()
    return fields, bad_lines


def split_header(message: bytes) -> tuple[bytes, int]:
    """(header block, offset where the body starts) of RFC 2822 message bytes."""
    for separator in (b"\n\n", b"\r\n\r\n"):
        index = message.find(separator)
        if index >= 0:
            return message[:index], index + len(separator)
    return message, len(message)


def addresses(value: str | None) -> list[str]:
    """``Name <a@x>, b@y`` -> ``["Name <a@x>", "b@y"]`` (display form, order kept)."""
    if not value:
        return []
    result = []
    for name, address in getaddresses([value]):
        if not address and not name:
            continue
        result.append(f"{name} <{address}>" if name and address else address or name)
    return result


def bare_addresses(value: str | list[str] | None) -> list[str]:
    """Lower-cased email addresses only."""
    if not value:
        return []
    values = value if isinstance(value, list) else [value]
    return [address.lower() for _, address in getaddresses(values) if address]


def parse_date(value: str | None) -> datetime | None:
    """An aware datetime from a Date header (naive ones are taken as UTC), or None."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def normalize_id(value: str | None) -> str:
    """A Message-ID for comparison: no angle brackets, no surrounding space."""
    return (value or "").strip().strip("<>").strip()


def first_id(value: str | None) -> str | None:
    """The first ``<id>`` in a References / In-Reply-To value."""
    if not value:
        return None
    match = re.search(r"<([^<>\s]+)>", value)
    if match:
        return match.group(1)
    token = value.split()[0] if value.split() else ""
    return normalize_id(token) or None


def all_ids(value: str | None) -> list[str]:
    if not value:
        return []
    found = re.findall(r"<([^<>\s]+)>", value)
    return found or [normalize_id(token) for token in value.split() if normalize_id(token)]
