"""Colour arguments of the Office servers: ``#1F4E79``, ``1F4E79`` or a basic colour name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from mcp_servers._core.errors import ToolError

T = TypeVar("T")

NAMED_COLORS = {
    "black": "000000",
    "white": "FFFFFF",
    "red": "FF0000",
    "green": "00B050",
    "blue": "0070C0",
    "yellow": "FFFF00",
    "gray": "808080",
    "grey": "808080",
    "orange": "FFA500",
}


def parse_color(value: str, argument: str, from_string: Callable[[str], T]) -> T:
    """The colour ``value`` built by ``from_string`` (python-docx's or python-pptx's
    ``RGBColor.from_string``, whose colour objects each library requires).

    Raises ToolError ``invalid_argument`` naming ``argument`` when ``value`` is neither a
    known name nor six hex digits.
    """
    text = NAMED_COLORS.get(value.strip().lower(), value.strip().lstrip("#"))
    try:
        return from_string(text.upper())
    except Exception as exc:
        raise ToolError(
            "invalid_argument", f"{argument}: {value!r} is not a colour like '#1F4E79'", argument=argument
        ) from exc
