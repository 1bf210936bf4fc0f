"""Pictures of a deck named as reads show them (``slide.{i}.image.{k}``), for the tools."""

from __future__ import annotations

from typing import Any

from atoll.errors import ErrorCode
from atoll.formats.pptx import pictures
from mcp_servers._core.errors import ToolError


def find_picture(deck: Any, annotation: object) -> tuple[int, str, Any]:
    """(slide index, annotation, shape) for ``slide.{i}.image.{k}``; ToolError otherwise."""
    text = str(annotation).strip()
    parts = text.split(".")
    if (
        len(parts) != 4
        or parts[0] != "slide"
        or parts[2] != "image"
        or not (parts[1].isdigit() and parts[3].isdigit())
    ):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"annotation: expected 'slide.<i>.image.<k>' as reads show, got {text!r}",
            argument="annotation",
        )
    slide_index = int(parts[1])
    if slide_index >= len(deck.slides):
        raise ToolError(
            ErrorCode.not_found,
            f"annotation: the deck has {len(deck.slides)} slide(s), no slide {slide_index}",
            argument="annotation",
        )
    found = pictures(deck.slides[slide_index], slide_index)
    for name, shape in found:
        if name == text:
            return slide_index, name, shape
    raise ToolError(
        ErrorCode.not_found,
        f"annotation: slide {slide_index} has {len(found)} picture(s), no {text!r}",
        argument="annotation",
    )
