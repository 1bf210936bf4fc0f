"""Autoshapes and text boxes with fill, outline and font settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core.errors import ToolError
from mcp_servers._office.colors import parse_color as office_color

_pptx_dml_color = lazy_module("pptx.dml.color")
_pptx_enum_shapes = lazy_module("pptx.enum.shapes")
_pptx_util = lazy_module("pptx.util")

if TYPE_CHECKING:
    from pptx.dml.color import RGBColor


def parse_color(value: str, argument: str) -> RGBColor:
    """``#1F4E79`` / ``1F4E79`` / a basic colour name as python-pptx's RGBColor (ToolError otherwise)."""
    return office_color(value, argument, _pptx_dml_color.RGBColor.from_string)


def shape_kind(name: str) -> Any:
    key = name.strip().upper().replace(" ", "_").replace("-", "_")
    aliases = {
        "ARROW": "RIGHT_ARROW",
        "CIRCLE": "OVAL",
        "ELLIPSE": "OVAL",
        "SQUARE": "RECTANGLE",
        "TRIANGLE": "ISOSCELES_TRIANGLE",
        "STAR": "STAR_5_POINT",
        "ARROW_RIGHT": "RIGHT_ARROW",
        "ARROW_LEFT": "LEFT_ARROW",
    }
    key = aliases.get(key, key)
    member = getattr(_pptx_enum_shapes.MSO_SHAPE, key, None)
    if member is None:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"shape_type: unknown shape {name!r} (e.g. rectangle, rounded_rectangle, oval, triangle, right_arrow, "
            "chevron, star_5_point, text_box)",
            argument="shape_type",
        )
    return member


def add_autoshape(
    slide: Any,
    shape_type: str,
    box: tuple[int, int, int, int],
    *,
    text: str | None,
    fill_color: str | None,
    line_color: str | None,
    line_width: float | None,
    font_size: float | None,
    font_color: str | None,
    bold: bool | None,
) -> Any:
    if shape_type.strip().lower() in ("text_box", "textbox", "text"):
        shape = slide.shapes.add_textbox(*box)
        shape.text_frame.word_wrap = True
    else:
        shape = slide.shapes.add_shape(shape_kind(shape_type), *box)
    if fill_color:
        shape.fill.solid()
        shape.fill.fore_color.rgb = parse_color(fill_color, "fill_color")
    if line_color:
        shape.line.color.rgb = parse_color(line_color, "line_color")
    if line_width is not None:
        shape.line.width = _pptx_util.Pt(line_width)
    if text is not None:
        shape.text_frame.text = text
        for paragraph in shape.text_frame.paragraphs:
            for run in paragraph.runs:
                if font_size is not None:
                    run.font.size = _pptx_util.Pt(font_size)
                if font_color is not None:
                    run.font.color.rgb = parse_color(font_color, "font_color")
                if bold is not None:
                    run.font.bold = bold
    return shape
