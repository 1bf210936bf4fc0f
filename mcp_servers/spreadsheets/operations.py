"""The 16 ``edit_spreadsheet`` operations: their argument models and how they apply.

Each operation is a pydantic model with a literal ``type``; ``Operation`` is their tagged
union, so the tool's JSON schema lists every shape and a wrong field gets a precise error.
:func:`apply_operations` applies them in order to an in-memory workbook; the caller saves
only if all succeeded (edits are atomic). ``VALUE_OPERATIONS`` are the types that change
cell values, sheet names or defined names and therefore need formulas recomputed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core import ToolError
from mcp_servers.spreadsheets.cells import (
    check_cell,
    check_range,
    check_value,
    column_letter_of,
    get_column_letter,
    quote_sheetname,
    range_boundaries,
)
from mcp_servers.spreadsheets.styling import (
    add_conditional_formatting,
    add_data_validation,
    add_image,
    format_cells,
    rename_sheet,
)
from mcp_servers.spreadsheets.workbook import sheet_of

if TYPE_CHECKING:
    from openpyxl import Workbook

# openpyxl is imported on the first edit, not when the server is built.
_defined_name = lazy_module("openpyxl.workbook.defined_name")

CellValue = str | int | float | bool | None
# Excel's comparison operators, as data validations and cell_is conditional formats name them.
ComparisonOperator = Literal[
    "between",
    "notBetween",
    "equal",
    "notEqual",
    "greaterThan",
    "lessThan",
    "greaterThanOrEqual",
    "lessThanOrEqual",
]
SheetRef = Annotated[str | int, Field(description="Sheet name (or 0-based index).")]
RangeRef = Annotated[
    str,
    Field(validation_alias=AliasChoices("range", "cell_range"), description="A1-style range, e.g. 'A1:C10'."),
]


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SetCell(_Op):
    type: Literal["set_cell"]
    sheet: SheetRef
    cell: str = Field(description="A1-style cell, e.g. 'C5'.")
    value: CellValue = Field(
        description="A number, text, boolean, null (clear) or a formula starting with '='."
    )


class AppendRows(_Op):
    type: Literal["append_rows"]
    sheet: SheetRef
    rows: list[list[CellValue]] = Field(description="Rows appended after the last used row.")


class RenameSheet(_Op):
    type: Literal["rename_sheet"]
    sheet: SheetRef
    new_name: str = Field(description="New sheet name; formulas that refer to the old name are updated.")


class FormatCells(_Op):
    type: Literal["format_cells"]
    sheet: SheetRef
    range: RangeRef
    bold: bool | None = None
    italic: bool | None = None
    underline: bool | None = None
    font_size: float | None = None
    font_color: str | None = Field(None, description="Hex color, e.g. 'FF0000'.")
    font_name: str | None = None
    fill_color: str | None = Field(
        None,
        validation_alias=AliasChoices("fill_color", "background_color"),
        description="Hex background color.",
    )
    horizontal_alignment: Literal["left", "center", "right", "justify", "general"] | None = None
    vertical_alignment: Literal["top", "center", "bottom"] | None = None
    wrap_text: bool | None = None
    border: Literal["none", "thin", "medium", "thick", "double"] | None = None
    number_format: str | None = None


class MergeCells(_Op):
    type: Literal["merge_cells"]
    sheet: SheetRef
    range: RangeRef


class UnmergeCells(_Op):
    type: Literal["unmerge_cells"]
    sheet: SheetRef
    range: RangeRef


class SetColumnWidth(_Op):
    type: Literal["set_column_width"]
    sheet: SheetRef
    column: str | int = Field(description="Column letter ('B') or 1-based number.")
    width: float = Field(gt=0, le=255)


class SetRowHeight(_Op):
    type: Literal["set_row_height"]
    sheet: SheetRef
    row: int = Field(ge=1, le=1048576)
    height: float = Field(gt=0, le=409)


class FreezePanes(_Op):
    type: Literal["freeze_panes"]
    sheet: SheetRef
    cell: str | None = Field(
        None,
        description="Top-left cell of the scrolling area ('B2' freezes row 1 and column A); null unfreezes.",
    )


class AddNamedRange(_Op):
    type: Literal["add_named_range"]
    sheet: SheetRef
    name: str
    range: RangeRef


class DeleteNamedRange(_Op):
    type: Literal["delete_named_range"]
    name: str
    sheet: SheetRef | None = None


class AddDataValidation(_Op):
    type: Literal["add_data_validation"]
    sheet: SheetRef
    range: RangeRef
    validation_type: Literal["list", "whole", "decimal", "date", "time", "text_length", "custom"]
    operator: ComparisonOperator | None = None
    values: list[str] | None = Field(None, description="Allowed values for validation_type='list'.")
    formula1: str | None = None
    formula2: str | None = None
    allow_blank: bool = True
    error_message: str | None = None
    prompt: str | None = None


class AddConditionalFormatting(_Op):
    type: Literal["add_conditional_formatting"]
    sheet: SheetRef
    range: RangeRef
    rule_type: Literal["cell_is", "formula", "color_scale", "data_bar"]
    operator: ComparisonOperator | None = None
    values: list[str | int | float] | None = Field(
        None, description="Operands for cell_is; [formula] for formula."
    )
    formula: str | None = None
    fill_color: str | None = None
    font_color: str | None = None
    bold: bool | None = None
    start_color: str | None = None
    end_color: str | None = None
    color: str | None = None


class SetAutoFilter(_Op):
    type: Literal["set_auto_filter"]
    sheet: SheetRef
    range: Annotated[str | None, Field(validation_alias=AliasChoices("range", "cell_range"))] = None


class SetNumberFormat(_Op):
    type: Literal["set_number_format"]
    sheet: SheetRef
    range: RangeRef
    format: str = Field(
        validation_alias=AliasChoices("format", "number_format"),
        description="e.g. '0.00', '#,##0', 'yyyy-mm-dd', '0%'.",
    )


class AddImage(_Op):
    type: Literal["add_image"]
    sheet: SheetRef
    image_path: str = Field(description="Virtual path of a PNG/JPEG/GIF image in the world.")
    cell: str = Field("A1", description="Anchor cell of the image's top-left corner.")
    width: int | None = Field(None, gt=0, le=10000)
    height: int | None = Field(None, gt=0, le=10000)


Operation = Annotated[
    SetCell
    | AppendRows
    | RenameSheet
    | FormatCells
    | MergeCells
    | UnmergeCells
    | SetColumnWidth
    | SetRowHeight
    | FreezePanes
    | AddNamedRange
    | DeleteNamedRange
    | AddDataValidation
    | AddConditionalFormatting
    | SetAutoFilter
    | SetNumberFormat
    | AddImage,
    Field(discriminator="type"),
]

VALUE_OPERATIONS = frozenset(
    {"set_cell", "append_rows", "rename_sheet", "merge_cells", "add_named_range", "delete_named_range"}
)
MAX_OPERATIONS = 1000
_RANGE_NAME = re.compile(r"^[A-Za-z_\\][A-Za-z0-9_.]{0,254}$")
_CELL_LIKE = re.compile(r"^[A-Za-z]{1,3}[0-9]+$")
MAX_APPEND_ROWS = 100_000


def apply_operations(state: Any, workbook: Workbook, operations: list[Any]) -> list[str]:
    """Apply ``operations`` in order; returns one summary line per operation.

    Raises ToolError naming the operation (``operations[i] (type)``) that failed; the
    workbook is then partly edited and must be discarded.
    """
    if not operations:
        raise ToolError(
            ErrorCode.invalid_argument, "operations: at least one operation is needed", argument="operations"
        )
    if len(operations) > MAX_OPERATIONS:
        raise ToolError(
            ErrorCode.too_large,
            f"operations: {len(operations)} operations (limit {MAX_OPERATIONS})",
            argument="operations",
        )
    summaries = []
    for index, op in enumerate(operations):
        label = f"operations[{index}] ({op.type})"
        try:
            summaries.append(_apply(state, workbook, op, label))
        except ToolError as exc:
            if exc.message.startswith(label):
                raise
            raise ToolError(exc.code, f"{label}: {exc.message}", argument="operations") from None
    return summaries


def _apply(state: Any, workbook: Workbook, op: Any, label: str) -> str:
    if op.type == "delete_named_range":
        if op.sheet is not None:
            ws = sheet_of(workbook, op.sheet)
            if op.name in ws.defined_names:
                del ws.defined_names[op.name]
                return f"deleted named range {op.name} of sheet {ws.title}"
        if op.name not in workbook.defined_names:
            raise ToolError(ErrorCode.not_found, f"no named range {op.name!r}")
        del workbook.defined_names[op.name]
        return f"deleted named range {op.name}"
    ws = sheet_of(workbook, op.sheet)
    if op.type == "set_cell":
        ws[check_cell(op.cell)] = check_value(op.value)
        return f"{ws.title}!{op.cell.upper()} set"
    if op.type == "append_rows":
        if len(op.rows) > MAX_APPEND_ROWS:
            raise ToolError(ErrorCode.too_large, f"{len(op.rows)} rows (limit {MAX_APPEND_ROWS})")
        first = ws._current_row + 1  # where openpyxl's append starts
        for row in op.rows:
            ws.append([check_value(v) for v in row])
        return f"{ws.title}: appended {len(op.rows)} rows from row {first}"
    if op.type == "rename_sheet":
        old = ws.title
        rename_sheet(workbook, ws, op.new_name)
        return f"renamed sheet {old!r} to {op.new_name!r}"
    if op.type == "format_cells":
        count = format_cells(ws, check_range(op.range), op)
        return f"{ws.title}!{op.range}: formatted {count} cells"
    if op.type == "merge_cells":
        ws.merge_cells(check_range(op.range))
        return f"{ws.title}!{op.range} merged"
    if op.type == "unmerge_cells":
        target = check_range(op.range)
        if target not in {str(r) for r in ws.merged_cells.ranges}:
            raise ToolError(ErrorCode.not_found, f"{op.range} is not a merged range of {ws.title}")
        ws.unmerge_cells(target)
        return f"{ws.title}!{op.range} unmerged"
    if op.type == "set_column_width":
        letter = column_letter_of(op.column)
        ws.column_dimensions[letter].width = op.width
        return f"{ws.title}: column {letter} width {op.width:g}"
    if op.type == "set_row_height":
        ws.row_dimensions[op.row].height = op.height
        return f"{ws.title}: row {op.row} height {op.height:g}"
    if op.type == "freeze_panes":
        ws.freeze_panes = check_cell(op.cell) if op.cell else None
        return f"{ws.title}: panes frozen at {op.cell}" if op.cell else f"{ws.title}: panes unfrozen"
    if op.type == "add_named_range":
        return _add_named_range(workbook, ws, op)
    if op.type == "add_data_validation":
        add_data_validation(ws, check_range(op.range), op)
        return f"{ws.title}!{op.range}: {op.validation_type} validation added"
    if op.type == "add_conditional_formatting":
        add_conditional_formatting(ws, check_range(op.range), op)
        return f"{ws.title}!{op.range}: {op.rule_type} conditional format added"
    if op.type == "set_auto_filter":
        ws.auto_filter.ref = check_range(op.range) if op.range else None
        return f"{ws.title}: auto filter {'on ' + op.range if op.range else 'removed'}"
    if op.type == "set_number_format":
        count = 0
        for row in ws[check_range(op.range)] if ":" in op.range else [[ws[check_cell(op.range)]]]:
            for cell in row:
                cell.number_format = op.format
                count += 1
        return f"{ws.title}!{op.range}: number format {op.format!r} on {count} cells"
    if op.type == "add_image":
        add_image(state, ws, op)
        return f"{ws.title}!{op.cell}: image {op.image_path} added"
    raise ToolError(ErrorCode.invalid_argument, f"unknown operation type {op.type!r}")  # pragma: no cover


def _add_named_range(workbook: Workbook, ws: Any, op: AddNamedRange) -> str:
    if not _RANGE_NAME.match(op.name) or _CELL_LIKE.match(op.name):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"name {op.name!r} is not a valid range name (letters, digits, _ and .; not a cell reference)",
        )
    if op.name in workbook.defined_names:
        raise ToolError(ErrorCode.already_exists, f"a named range {op.name!r} already exists")
    min_col, min_row, max_col, max_row = range_boundaries(check_range(op.range))
    ref = f"${get_column_letter(min_col)}${min_row}"
    if (min_col, min_row) != (max_col, max_row):
        ref += f":${get_column_letter(max_col)}${max_row}"
    workbook.defined_names[op.name] = _defined_name.DefinedName(
        op.name, attr_text=f"{quote_sheetname(ws.title)}!{ref}"
    )
    return f"named range {op.name} = {ws.title}!{ref}"


__all__ = ["VALUE_OPERATIONS", "Operation", "apply_operations"]
