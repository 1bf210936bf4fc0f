"""Colour arguments of the Office servers: ``#1F4E79``, ``1F4E79`` or a basic colour name."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from atoll.errors import ErrorCode
from mcp_servers._core.errors import ToolError

T = TypeVar("T")
_HEX6 = re.compile(r"[0-9A-Fa-f]{6}")

#: Names every Office server accepts for a colour: Office's standard colours, plus the light
#: fills spreadsheets use for highlighting (the names Excel's conditional formats show).
NAMED_COLORS = {
    "black": "000000",
    "white": "FFFFFF",
    "red": "FF0000",
    "green": "00B050",
    "blue": "0070C0",
    "yellow": "FFFF00",
    "orange": "FFC000",
    "gray": "808080",
    "grey": "808080",
    "lightgray": "D9D9D9",
    "lightgreen": "C6EFCE",
    "lightred": "FFC7CE",
    "lightyellow": "FFEB9C",
    "lightblue": "DDEBF7",
}


def parse_color(value: str, argument: str, from_string: Callable[[str], T]) -> T:
    """The colour ``value`` built by ``from_string`` (python-docx's or python-pptx's
    ``RGBColor.from_string``, whose colour objects each library requires).

    Raises ToolError ``invalid_argument`` naming ``argument`` when ``value`` is neither a
    known name nor six hex digits.
    """
    text = NAMED_COLORS.get(value.strip().lower(), value.strip().lstrip("#"))
    if not _HEX6.fullmatch(text):  # the libraries' parsers take "12345" as 12 34 05
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {value!r} is not a colour like '#1F4E79'",
            argument=argument,
        )
    return from_string(text.upper())
