"""Decoding header values safely: RFC 2047 words, raw 8-bit (non-UTF-8) bytes, addresses, dates."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.utils import getaddresses, parsedate_to_datetime

# A field: name, colon, value, plus any folded continuation lines (starting with blanks).
_FIELD = re.compile(rb"^([!-9;-~]+)[ \t]*:[ \t]?([^\n]*(?:\n[ \t][^\n]*)*)", re.MULTILINE)
_CONTINUATION = re.compile(rb"\n[ \t]")
_EMPTY_LINE = re.compile(rb"\n\r?(?=\n|$)")


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


@functools.lru_cache(maxsize=16)
def _as_bytes(names: frozenset[str]) -> frozenset[bytes]:
    return frozenset(name.encode("ascii") for name in names)


def parse_header_block(block: bytes, wanted: frozenset[str] | None = None) -> tuple[dict[str, str], int]:
    """Header fields of a message's header block (lower-case names, first occurrence kept,
    values decoded), and how many lines were not headers (0 for a well-formed block).

    With ``wanted``, only those fields are decoded and returned (the index skips the dozens
    of Received/DKIM lines a real message carries).
    """
    fields: dict[str, str] = {}
    wanted_bytes = _as_bytes(wanted) if wanted is not None else None
    headers = 0
    for match in _FIELD.finditer(block):
        headers += 1
        name_bytes = match.group(1).lower()
        if wanted_bytes is not None and name_bytes not in wanted_bytes:
            continue
        name = name_bytes.decode("ascii")
        if name in fields:
            continue
        raw = match.group(2)
        if b"\n" in raw:  # folded: join continuation lines with one space
            raw = b" ".join(part.strip() for part in raw.split(b"\n"))
        fields[name] = decode_value(decode_bytes(raw.strip()))
    # Lines that are neither a field start, a continuation nor empty are malformed.
    lines = block.count(b"\n") + 1
    continuations = len(_CONTINUATION.findall(block))
    empty = len(_EMPTY_LINE.findall(block)) + (1 if block[:1] in (b"\n", b"\r") or not block else 0)
    return fields, max(0, lines - continuations - empty - headers)


def split_header(message: bytes) -> tuple[bytes, int]:
    """(header block, offset where the body starts) of RFC 2822 message bytes."""
    for separator in (b"\n\n", b"\r\n\r\n"):
        index = message.find(separator)
        if index >= 0:
            return message[:index], index + len(separator)
    return message, len(message)


_SIMPLE_ADDRESS = re.compile(
    r"^\s*(?:([^\"<>()\\;:@,]*?)\s*<([^<>\s@\",]+@[^<>\s@\",]+)>|([^<>\s@\",()]+@[^<>\s@\",()]+))\s*$"
)


def addresses(value: str | None) -> list[str]:
    """``Name <a@x>, b@y`` -> ``["Name <a@x>", "b@y"]`` (display form, order kept)."""
    if not value:
        return []
    fast = _simple_addresses(value)
    if fast is not None:
        return fast
    result = []
    for name, address in getaddresses([value]):
        if not address and not name:
            continue
        result.append(display_address(name, address) if name and address else address or name)
    return result


_SPECIALS = re.compile(r'[,;:@"()<>\[\]\\]')


def display_address(name: str, address: str) -> str:
    """``Name <a@x>``, quoting the name when it holds a comma or another special character
    (so the value can be written back into a header unchanged)."""
    if _SPECIALS.search(name):
        name = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{name} <{address}>"


def _simple_addresses(value: str) -> list[str] | None:
    """The common case (``Name <a@x>`` / ``a@x``, comma-separated, nothing quoted) without
    the email package's slow general parser; None when the value needs that parser."""
    if '"' in value or "(" in value:
        return None
    result = []
    for part in value.split(","):
        if not part.strip():
            continue
        match = _SIMPLE_ADDRESS.match(part)
        if match is None:
            return None
        name, bracketed, bare = match.groups()
        if bracketed:
            result.append(display_address(name, bracketed) if name else bracketed)
        else:
            result.append(bare)
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
