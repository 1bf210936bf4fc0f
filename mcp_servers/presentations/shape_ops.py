"""edit_slides operations that address one placeholder or table of a slide."""

from __future__ import annotations

from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.pptx import iter_shapes
from mcp_servers._core.errors import ToolError
from mcp_servers.presentations.models import SlideOperation, TableSpec
from mcp_servers.presentations.shapes import parse_color
from mcp_servers.presentations.slides import (
    BODY_TYPES,
    add_table,
    body_frame,
    placeholder,
    set_text_keep_format,
    subtitle_shape,
    title_shape,
)

_pptx_util = lazy_module("pptx.util")

PLACEHOLDERS = ("title", "subtitle", "body", "left", "right")


def placeholder_shape(slide: Any, name: str | None, number: int, *, create_body: bool = False) -> Any:
    """The shape for a placeholder name (default body); ToolError when the slide has none."""
    key = (name or "body").strip().lower()
    if key not in PLACEHOLDERS:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"operations[{number}]: placeholder {name!r} is not one of {', '.join(PLACEHOLDERS)}",
            argument="operations",
        )
    if key == "title":
        shape = title_shape(slide)
    elif key == "subtitle":
        shape = subtitle_shape(slide)
    elif key == "right":
        shape = placeholder(slide, BODY_TYPES, nth=1)
    else:
        shape = placeholder(slide, BODY_TYPES)
        if shape is None and key == "body":
            if create_body:
                frame = body_frame(slide, create=True)
                return next(
                    s for s in slide.shapes if s.has_text_frame and s.text_frame._txBody is frame._txBody
                )
            shape = next((s for s in slide.shapes if s.name == "Bullets" and s.has_text_frame), None)
    if shape is None:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"operations[{number}]: the slide has no {key} placeholder",
            argument="operations",
        )
    return shape


def _table(slide: Any, operation: SlideOperation, number: int) -> Any:
    tables = [
        shape for shape in iter_shapes(slide.shapes) if getattr(shape, "has_table", False) and shape.has_table
    ]
    if not 0 <= operation.table_idx < len(tables):
        raise ToolError(
            ErrorCode.not_found,
            f"operations[{number}]: slide {operation.slide_index} has {len(tables)} table(s), no table_idx {operation.table_idx}",
            argument="operations",
        )
    table = tables[operation.table_idx].table
    rows, cols = len(table.rows), len(table.columns)
    if operation.row is None or operation.column is None:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"operations[{number}]: 'row' and 'column' are required",
            argument="operations",
        )
    if not (0 <= operation.row < rows and 0 <= operation.column < cols):
        raise ToolError(
            ErrorCode.not_found,
            f"operations[{number}]: the table is {rows}x{cols}, no cell ({operation.row}, {operation.column})",
            argument="operations",
        )
    return table.cell(operation.row, operation.column)


def _format_runs(runs: list[Any], operation: SlideOperation) -> None:
    for run in runs:
        font = run.font
        if operation.bold is not None:
            font.bold = operation.bold
        if operation.italic is not None:
            font.italic = operation.italic
        if operation.underline is not None:
            font.underline = operation.underline
        if operation.font_size is not None:
            font.size = _pptx_util.Pt(operation.font_size)
        if operation.font_color is not None:
            font.color.rgb = parse_color(operation.font_color, "font_color")


def _selected_runs(frame: Any, operation: SlideOperation, number: int) -> list[Any]:
    paragraphs = list(frame.paragraphs)
    if operation.paragraph_index is not None:
        if not 0 <= operation.paragraph_index < len(paragraphs):
            raise ToolError(
                ErrorCode.not_found,
                f"operations[{number}]: {len(paragraphs)} paragraph(s), no paragraph_index {operation.paragraph_index}",
                argument="operations",
            )
        paragraphs = [paragraphs[operation.paragraph_index]]
    runs = [run for paragraph in paragraphs for run in paragraph.runs]
    if operation.run_index is not None:
        if operation.paragraph_index is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"operations[{number}]: run_index needs paragraph_index",
                argument="operations",
            )
        if not 0 <= operation.run_index < len(runs):
            raise ToolError(
                ErrorCode.not_found,
                f"operations[{number}]: the paragraph has {len(runs)} run(s), no run_index {operation.run_index}",
                argument="operations",
            )
        runs = [runs[operation.run_index]]
    return runs


def apply_shape_operation(slide: Any, operation: SlideOperation, number: int) -> dict[str, Any]:
    """clear_placeholder, append_table, update_table_cell, format_table_cell,
    apply_text_formatting, add_hyperlink."""
    kind = operation.type
    if kind == "clear_placeholder":
        shape = placeholder_shape(slide, operation.placeholder, number)
        set_text_keep_format(shape.text_frame, "")
    elif kind == "append_table":
        if not operation.rows:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"operations[{number}] (append_table): 'rows' is required",
                argument="operations",
            )
        box: dict[str, Any] = {}
        if operation.placeholder:
            anchor = placeholder_shape(slide, operation.placeholder, number)
            box = {
                "left": anchor.left / 914400,
                "top": anchor.top / 914400,
                "width": anchor.width / 914400,
                "height": None,
            }
            if not anchor.text_frame.text.strip():
                anchor._element.getparent().remove(anchor._element)
        add_table(slide, TableSpec(rows=operation.rows, header=operation.header), **box)
    elif kind == "update_table_cell":
        if operation.text is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"operations[{number}] (update_table_cell): 'text' is required",
                argument="operations",
            )
        set_text_keep_format(_table(slide, operation, number).text_frame, operation.text)
    elif kind == "format_table_cell":
        cell = _table(slide, operation, number)
        _format_runs([run for p in cell.text_frame.paragraphs for run in p.runs], operation)
        if operation.bg_color is not None:
            cell.fill.solid()
            cell.fill.fore_color.rgb = parse_color(operation.bg_color, "bg_color")
    elif kind == "apply_text_formatting":
        shape = placeholder_shape(slide, operation.placeholder, number)
        _format_runs(_selected_runs(shape.text_frame, operation, number), operation)
    elif kind == "add_hyperlink":
        if not operation.url:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"operations[{number}] (add_hyperlink): 'url' is required",
                argument="operations",
            )
        shape = placeholder_shape(slide, operation.placeholder, number)
        runs = _selected_runs(shape.text_frame, operation, number)
        if not runs:
            raise ToolError(
                ErrorCode.invalid_argument, f"operations[{number}]: no text to link", argument="operations"
            )
        for run in runs:
            run.hyperlink.address = operation.url
    return {"type": kind, "slide_index": operation.slide_index}
