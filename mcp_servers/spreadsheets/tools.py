"""The spreadsheets server (consolidated tool ``sheets``) and its writing tools; the read
tools are in :mod:`mcp_servers.spreadsheets.tools_read`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core import ServerDefinition, ToolError, file_lock, validate_id
from mcp_servers._core.options import ServerOptions
from mcp_servers.spreadsheets.cells import check_cell, check_value
from mcp_servers.spreadsheets.charts import add_chart
from mcp_servers.spreadsheets.operations import VALUE_OPERATIONS, Operation, apply_operations
from mcp_servers.spreadsheets.results import (
    CellCleared,
    CellWritten,
    ChartCreated,
    SpreadsheetCreated,
    SpreadsheetDeleted,
    SpreadsheetEdited,
    TabAdded,
    TabDeleted,
)
from mcp_servers.spreadsheets.styling import rename_sheet
from mcp_servers.spreadsheets.workbook import (
    WORKBOOK_SUFFIXES,
    SheetsState,
    WorkbookFile,
    check_workbook_path,
    open_workbook,
    save_workbook,
    sheet_of,
)

if TYPE_CHECKING:
    from openpyxl import Workbook

# openpyxl is imported on the first call that creates or edits a workbook.
_openpyxl = lazy_module("openpyxl")


class SpreadsheetsOptions(ServerOptions):
    """Options of the spreadsheets server."""

    recalc: Literal["auto", "warm", "cold", "off"] | None = Field(
        None, description="formula recalculation: auto (warm if possible), warm, cold or off"
    )
    prestart: bool | None = Field(None, description="start the warm LibreOffice with the server")
    max_file_mb: float | None = Field(None, gt=0, description="largest workbook opened")
    soffice: str | None = Field(None, description="LibreOffice executable (default: soffice on PATH)")
    recalc_timeout_s: float | None = Field(None, gt=0, description="limit of one recalculation (default 30)")


SERVER = ServerDefinition(
    "spreadsheets",
    consolidated_name="sheets",
    description=(
        "Excel workbooks (.xlsx) and CSV files in the world's filesystem. Paths are virtual ('/Reports/q3.xlsx'). "
        "Formulas are recomputed after every write, so reads show computed values."
    ),
    state=SheetsState.create,
    options=SpreadsheetsOptions,
)

CellValue = str | int | float | bool | None
TabRef = Annotated[int | str, Field(description="0-based tab position (or the tab's name).")]


class SheetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Sheet name (1-31 characters).")
    headers: list[CellValue] | None = Field(None, description="First row.")
    rows: list[list[CellValue]] | None = Field(
        None, description="Rows after the headers; '=...' are formulas."
    )


class SheetData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    headers: list[CellValue] | None = None
    rows: list[list[CellValue]] | None = None


# -- helpers --------------------------------------------------------------------------


def workbook_path(
    state: SheetsState, file_path: str, *, argument: str = "file_path"
) -> tuple[WorkbookFile, str]:
    """The workbook named by ``file_path``, read once through the root's descriptor."""
    path = state.ctx.files.at(file_path, argument=argument, allow_root=False)
    return check_workbook_path(state, path, path.virtual, argument=argument), path.virtual


def _edit(state: SheetsState, file_path: str, change: Any, *, values_changed: bool) -> dict[str, Any]:
    """Load, change, save (atomically, with recalculation) under the file's writer lock."""
    path = state.ctx.files.at(file_path, argument="file_path", allow_root=False)
    with file_lock(path.lock_key):
        # Read under the lock, so the version we edit is the one no other writer changes.
        source, virtual = workbook_path(state, file_path)
        workbook = state.take_workbook(source) or open_workbook(source, virtual)
        outcome = change(workbook)
        report = save_workbook(state, workbook, path, values_changed=values_changed, source=source)
        state.keep_workbook(path, workbook)
    return {"file_path": virtual, **outcome, "recalculation": report.as_dict()}


def _fill_sheet(ws: Any, headers: list[Any] | None, rows: list[list[Any]] | None) -> int:
    count = 0
    if headers:
        ws.append([check_value(v, argument="headers") for v in headers])
        count += 1
    for row in rows or []:
        ws.append([check_value(v, argument="rows") for v in row])
        count += 1
    return count


def _new_title(workbook: Workbook, name: str, *, argument: str) -> str:
    probe = workbook.create_sheet("__atoll_probe__")
    try:
        rename_sheet(workbook, probe, name)
    except ToolError as exc:
        raise ToolError(exc.code, exc.message.replace("new_name", argument), argument=argument) from None
    finally:
        title = probe.title
        workbook.remove(probe)
    return title


# -- tools ----------------------------------------------------------------------------


@SERVER.tool(action="create")
def create_spreadsheet(
    state: SheetsState,
    directory: str,
    file_name: str,
    sheets: list[SheetSpec] | None = None,
) -> SpreadsheetCreated:
    """Create a new .xlsx workbook with the given sheets (headers, rows; '=...' are formulas).

    Args:
        directory: Folder for the file, e.g. '/Outputs' (created if missing).
        file_name: File name, e.g. 'summary.xlsx' ('.xlsx' is added when missing).
        sheets: Sheets in order: [{"name", "headers", "rows"}]; one empty 'Sheet1' when omitted.
    """
    validate_id(file_name, argument="file_name")
    name = file_name.strip()
    if Path(name).suffix.lower() not in WORKBOOK_SUFFIXES:
        name += ".xlsx"
    folder = state.ctx.files.at(directory, argument="directory").require("dir", must_exist=False)
    target = folder.child(name, "file_name").require("file", must_exist=False)
    virtual = target.virtual
    if target.exists():
        raise ToolError(
            ErrorCode.already_exists, f"file_name: {virtual} already exists", argument="file_name"
        )
    workbook = _openpyxl.Workbook()
    workbook.remove(workbook.active)
    specs = sheets or [SheetSpec(name="Sheet1")]
    rows = 0
    for spec in specs:
        ws = workbook.create_sheet(_new_title(workbook, spec.name, argument="sheets.name"))
        rows += _fill_sheet(ws, spec.headers, spec.rows)
    with file_lock(target.lock_key):
        report = save_workbook(state, workbook, target, values_changed=True, overwrite=False)
        state.keep_workbook(target, workbook)
    return SpreadsheetCreated(
        file_path=virtual,
        sheets=[ws.title for ws in workbook.worksheets],
        rows_written=rows,
        recalculation=report.as_dict(),
    )


@SERVER.tool(action="delete", destructive=True)
def delete_spreadsheet(state: SheetsState, file_path: str) -> SpreadsheetDeleted:
    """Delete a workbook (.xlsx/.xlsm) or CSV file.

    Args:
        file_path: The file to delete.
    """
    path = state.ctx.files.at(file_path, argument="file_path", allow_root=False).require("file")
    virtual = path.virtual
    if path.suffix.lower() not in (*WORKBOOK_SUFFIXES, ".csv"):
        raise ToolError(
            ErrorCode.unsupported, f"file_path: {virtual} is not a spreadsheet", argument="file_path"
        )
    with file_lock(path.lock_key):
        path.unlink()
    return SpreadsheetDeleted(file_path=virtual, deleted=True)


@SERVER.tool(action="add_tab")
def add_tab(
    state: SheetsState,
    file_path: str,
    tab_name: str,
    sheet_data: SheetData | None = None,
    index: Annotated[int, Field(ge=0)] | None = None,
) -> TabAdded:
    """Add a tab, optionally with headers and rows.

    Args:
        file_path: The workbook (.xlsx).
        tab_name: Name of the new tab.
        sheet_data: {"headers": [...], "rows": [[...], ...]} to fill it with.
        index: 0-based position; at the end when omitted.
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        title = _new_title(workbook, tab_name, argument="tab_name")
        ws = workbook.create_sheet(title, index)
        rows = _fill_sheet(ws, sheet_data.headers, sheet_data.rows) if sheet_data else 0
        return {"tab_name": title, "tab_index": workbook.worksheets.index(ws), "rows_written": rows}

    return TabAdded.from_fields(_edit(state, file_path, change, values_changed=True))


@SERVER.tool(action="delete_tab", destructive=True)
def delete_tab(state: SheetsState, file_path: str, tab_index: TabRef) -> TabDeleted:
    """Delete one tab (a workbook keeps at least one).

    Args:
        file_path: The workbook (.xlsx).
        tab_index: 0-based position (or name) of the tab to delete.
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        ws = sheet_of(workbook, tab_index, argument="tab_index")
        if len(workbook.worksheets) == 1:
            raise ToolError(
                ErrorCode.invalid_argument,
                "tab_index: cannot delete the only tab of a workbook",
                argument="tab_index",
            )
        workbook.remove(ws)
        return {"deleted_tab": ws.title, "tabs": [w.title for w in workbook.worksheets]}

    return TabDeleted.from_fields(_edit(state, file_path, change, values_changed=True))


@SERVER.tool(action="edit")
def edit_spreadsheet(state: SheetsState, file_path: str, operations: list[Operation]) -> SpreadsheetEdited:
    """Apply edit operations to a workbook in order, atomically (all or none).

    Operation types (each with "type" and "sheet"): set_cell, append_rows, rename_sheet, format_cells,
    merge_cells, unmerge_cells, set_column_width, set_row_height, freeze_panes, add_named_range,
    delete_named_range, add_data_validation, add_conditional_formatting, set_auto_filter,
    set_number_format, add_image. Formulas are recomputed after the edit.

    Args:
        file_path: The workbook (.xlsx).
        operations: e.g. [{"type": "set_cell", "sheet": "Model", "cell": "C5", "value": "=SUM(C1:C4)"}].
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        return {"applied": apply_operations(state, workbook, operations)}

    changed = any(op.type in VALUE_OPERATIONS for op in operations)
    return SpreadsheetEdited.from_fields(_edit(state, file_path, change, values_changed=changed))


@SERVER.tool(action="add_content")
def add_content_text(
    state: SheetsState, file_path: str, tab_index: TabRef, cell: str, value: CellValue
) -> CellWritten:
    """Set one cell's value or formula ('=...').

    Args:
        file_path: The workbook (.xlsx).
        tab_index: 0-based tab position or tab name.
        cell: A1-style cell, e.g. 'B7'.
        value: Number, text, boolean or a formula starting with '='.
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        ws = sheet_of(workbook, tab_index, argument="tab_index")
        target = check_cell(cell)
        ws[target] = check_value(value)
        return {"tab_name": ws.title, "cell": target}

    return CellWritten.from_fields(_edit(state, file_path, change, values_changed=True))


@SERVER.tool(action="delete_content", destructive=True)
def delete_content_cell(state: SheetsState, file_path: str, tab_index: TabRef, cell: str) -> CellCleared:
    """Clear one cell's value (its formatting stays).

    Args:
        file_path: The workbook (.xlsx).
        tab_index: 0-based tab position or tab name.
        cell: A1-style cell, e.g. 'B7'.
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        ws = sheet_of(workbook, tab_index, argument="tab_index")
        target = check_cell(cell)
        previous = ws[target].value
        ws[target].value = None
        return {
            "tab_name": ws.title,
            "cell": target,
            "previous_value": previous
            if previous is None or isinstance(previous, str | int | float | bool)
            else str(previous),
        }

    return CellCleared.from_fields(_edit(state, file_path, change, values_changed=True))


@SERVER.tool(action="create_chart")
def create_chart(
    state: SheetsState,
    file_path: str,
    sheet: str | int,
    data_range: str,
    chart_type: Literal["bar", "line", "pie"] = "bar",
    title: str | None = None,
    position: str | None = None,
    categories_column: str | int | None = None,
    include_header: bool = True,
) -> ChartCreated:
    """Add a native chart of a data range (series in columns) to a sheet.

    Args:
        file_path: The workbook (.xlsx).
        sheet: Sheet name (or 0-based index) holding the data; the chart goes there too.
        data_range: e.g. 'A1:C13' (first column = categories unless categories_column says otherwise).
        chart_type: bar, line or pie.
        title: Chart title.
        position: Anchor cell of the chart's top-left corner, e.g. 'E2'.
        categories_column: Column with the category labels (letter or 1-based number).
        include_header: Whether the range's first row holds series names.
    """

    def change(workbook: Workbook) -> dict[str, Any]:
        ws = sheet_of(workbook, sheet)
        summary = add_chart(
            ws,
            data_range,
            chart_type=chart_type,
            title=title,
            position=position,
            categories_column=categories_column,
            include_header=include_header,
        )
        return {"sheet": ws.title, **summary}

    return ChartCreated.from_fields(_edit(state, file_path, change, values_changed=False))
