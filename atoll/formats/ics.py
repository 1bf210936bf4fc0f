"""Split an .ics file into its top-level component blocks without parsing them.

The calendar server's tools and the grader read calendar files this way (then parse each
VEVENT block on its own), so one broken event hides no other from either of them.

Writes splice one VEVENT block in or out of the file text, so every other byte of the
file (other events, time zones, unknown components, the producer's formatting) stays
exactly as it was. Parsing is then needed only for the block being changed.

Lines that begin with a space or tab are folded continuations (RFC 5545 §3.1), so a
``BEGIN:``/``END:`` at the start of a line is always a real component boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from atoll.errors import CodedError

_BOUNDARY = re.compile(r"^(BEGIN|END):([A-Za-z0-9-]+)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)


class IcsSyntaxError(CodedError, ValueError):
    """The file is not an iCalendar stream (unbalanced or missing BEGIN/END lines)."""

    code = "ics_syntax"


@dataclass(frozen=True)
class Block:
    """One component directly inside a VCALENDAR: its name and its text span."""

    name: str  # upper case: VEVENT, VTIMEZONE, VTODO, ...
    start: int  # offset of its BEGIN line
    end: int  # offset just after its END line (line break included)

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@dataclass(frozen=True)
class IcsLayout:
    """The blocks of a file and where new components may be inserted."""

    blocks: list[Block]
    insert_at: int  # offset of the last END:VCALENDAR line
    newline: str  # the file's line break ("\r\n" or "\n")


def split_blocks(source: str) -> IcsLayout:
    """The top-level blocks of every VCALENDAR in ``source``.

    Raises IcsSyntaxError when there is no VCALENDAR or BEGIN/END lines do not balance.
    """
    blocks: list[Block] = []
    stack: list[tuple[str, int]] = []
    insert_at = -1
    for match in _BOUNDARY.finditer(source):
        kind, name = match.group(1).upper(), match.group(2).upper()
        line_end = source.find("\n", match.end())
        line_end = len(source) if line_end < 0 else line_end + 1
        if kind == "BEGIN":
            if not stack and name != "VCALENDAR":
                raise IcsSyntaxError(f"line {_line_of(source, match.start())}: {name} outside a VCALENDAR")
            stack.append((name, match.start()))
            continue
        if not stack or stack[-1][0] != name:
            expected = stack[-1][0] if stack else "nothing"
            raise IcsSyntaxError(
                f"line {_line_of(source, match.start())}: END:{name} does not close {expected}"
            )
        _, begin = stack.pop()
        if len(stack) == 1:
            blocks.append(Block(name, begin, line_end))
        elif not stack:
            insert_at = match.start()
    if stack:
        raise IcsSyntaxError(
            f"{stack[-1][0]} opened on line {_line_of(source, stack[-1][1])} is never closed"
        )
    if insert_at < 0:
        raise IcsSyntaxError("no BEGIN:VCALENDAR ... END:VCALENDAR found")
    newline = "\r\n" if "\r\n" in source[:4096] else "\n"
    return IcsLayout(blocks=blocks, insert_at=insert_at, newline=newline)


def read_text(data: bytes) -> str:
    """The text of a calendar file's bytes."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:  # old exports in Latin-1 still carry readable events
        return data.decode("latin-1")


def with_newline(text: str, newline: str) -> str:
    """``text`` (as icalendar serialises it, CRLF) with the file's line breaks."""
    if newline == "\r\n":
        return text
    return text.replace("\r\n", newline)


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1
