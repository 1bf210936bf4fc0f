"""The spreadsheets server's read-only tools: read_tab, read_csv, list_tabs_in_spreadsheet,
filter_tab. None of them writes a file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from atoll.errors import ErrorCode
from atoll.formats.xlsx import Scalar
from mcp_servers._core import ToolError, ToolOutput, WorldPath
from mcp_servers.spreadsheets.cells import column_index_from_string, get_column_letter, parse_range
from mcp_servers.spreadsheets.reading import Grid, matches, read_csv_rows, read_grid, tab_names
from mcp_servers.spreadsheets.results import CsvRead, FilterResult, TabList, TabRead
from mcp_servers.spreadsheets.tools import SERVER, TabRef, workbook_path
from mcp_servers.spreadsheets.workbook import SheetsState, check_workbook_path


class FilterCondition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    column: str | int = Field(description="Header text, column letter ('C') or 1-based column number.")
    operator: Literal[
        "equals",
        "not_equals",
        "contains",
        "not_contains",
        "starts_with",
        "ends_with",
        "greater_than",
        "less_than",
        "greater_or_equal",
        "less_or_equal",
        "is_empty",
        "is_not_empty",
    ] = "equals"
    value: Scalar = None


def _render_grid(grid: Grid, virtual: str) -> str:
    header = "row | " + " | ".join(get_column_letter(c) for c in range(grid.min_col, grid.max_col + 1))
    lines = [f"{virtual} [{grid.tab_name}] {grid.range}", header]
    for offset, row in enumerate(grid.values):
        shown = ["" if v is None else str(v) for v in row]
        lines.append(f"{grid.min_row + offset} | " + " | ".join(shown))
    return "\n".join(lines)


@SERVER.tool(action="read_tab", read_only=True)
def read_tab(
    state: SheetsState,
    file_path: str,
    tab_index: TabRef = 0,
    cell_range: str | None = None,
    include_formulas: bool = False,
    max_rows: Annotated[int, Field(ge=1, le=10000)] = 1000,
    max_cols: Annotated[int, Field(ge=1, le=500)] = 100,
    compact: bool = False,
) -> ToolOutput[TabRead]:
    """Read cell values of one tab (formulas read as their computed values; dates as ISO dates).

    Args:
        file_path: The workbook (.xlsx) or a .csv file (one tab).
        tab_index: 0-based tab position or tab name (see list_tabs_in_spreadsheet).
        cell_range: e.g. 'A1:D20', 'B:D' or '5:10'; the used area when omitted.
        include_formulas: Also return the formula text of formula cells.
        max_rows: Cap on rows returned (a continuation range is suggested when cut).
        max_cols: Cap on columns returned.
        compact: Return only non-empty cells as {"A1": value} instead of a full grid.
    """
    data, text = tab_contents(
        state, file_path, tab_index, cell_range, include_formulas, max_rows, max_cols, compact
    )
    return ToolOutput(TabRead.from_fields(data), text=text)


def tab_contents(
    state: SheetsState,
    file_path: str,
    tab_index: TabRef,
    cell_range: str | None,
    include_formulas: bool,
    max_rows: int,
    max_cols: int,
    compact: bool,
) -> tuple[dict[str, Any], str]:
    """read_tab's fields, its cell values as read (numbers, datetimes), and its text."""
    path = state.ctx.files.at(file_path, argument="file_path", allow_root=False).require("file")
    virtual = path.virtual
    if path.suffix.lower() == ".csv":
        grid, rows_cut, cols_cut = _csv_grid(path, virtual, tab_index, cell_range, max_rows, max_cols)
    else:
        source = check_workbook_path(state, path, virtual)
        grid, rows_cut, cols_cut = read_grid(
            state, source, virtual, tab_index, cell_range, max_rows=max_rows, max_cols=max_cols
        )
    data: dict[str, Any] = {
        "file_path": virtual,
        "tab_index": grid.tab_index,
        "tab_name": grid.tab_name,
        "range": grid.range,
        "sheet_rows": grid.sheet_rows,
        "sheet_columns": grid.sheet_cols,
    }
    if compact:
        data["cells"] = {
            f"{get_column_letter(grid.min_col + c)}{grid.min_row + r}": value
            for r, row in enumerate(grid.values)
            for c, value in enumerate(row)
            if value is not None and value != ""
        }
    else:
        data["rows"] = grid.values
    if include_formulas:
        data["formulas"] = grid.formulas
    if rows_cut or cols_cut:
        first_col, last_col = get_column_letter(grid.min_col), get_column_letter(grid.max_col)
        hint = []
        if rows_cut:
            hint.append(
                f"more rows: cell_range='{first_col}{grid.max_row + 1}:{last_col}{grid.max_row + max_rows}'"
            )
        if cols_cut:
            nxt = get_column_letter(grid.max_col + 1)
            hint.append(
                f"more columns: cell_range='{nxt}{grid.min_row}:{get_column_letter(grid.max_col + max_cols)}{grid.max_row}'"
            )
        data["truncated"] = True
        data["continuation"] = "; ".join(hint)
    text = _render_grid(grid, virtual)
    if compact:
        text = f"{virtual} [{grid.tab_name}] {grid.range}\n" + "\n".join(
            f"{k}: {v}" for k, v in data["cells"].items()
        )
    if include_formulas and grid.formulas:
        text += "\nformulas: " + "; ".join(f"{k} {v}" for k, v in grid.formulas.items())
    if data.get("truncated"):
        text += f"\n(truncated; {data['continuation']})"
    return data, text


def _csv_grid(
    path: WorldPath, virtual: str, tab_index: int | str, cell_range: str | None, max_rows: int, max_cols: int
) -> tuple[Grid, bool, bool]:

    if tab_index not in (0, "0", Path(virtual).stem):
        raise ToolError(
            ErrorCode.not_found,
            f"tab_index: a CSV file has one tab (0), got {tab_index}",
            argument="tab_index",
        )
    rows, total, _ = read_csv_rows(path, virtual, delimiter=None, encoding="utf-8", row_limit=1_000_000)
    width = max((len(r) for r in rows), default=0)
    if cell_range:
        min_row, min_col, max_row, max_col = parse_range(cell_range)
        max_row, max_col = max_row or max(total, min_row), max_col or max(width, min_col)
    else:
        min_row, min_col, max_row, max_col = 1, 1, max(total, 1), max(width, 1)
    rows_cut, cols_cut = max_row - min_row + 1 > max_rows, max_col - min_col + 1 > max_cols
    max_row, max_col = min(max_row, min_row + max_rows - 1), min(max_col, min_col + max_cols - 1)
    values = []
    for r in range(min_row, max_row + 1):
        source = rows[r - 1] if r - 1 < len(rows) else []
        values.append([source[c - 1] if c - 1 < len(source) else None for c in range(min_col, max_col + 1)])
    return Grid(Path(virtual).stem, min_row, min_col, values, {}, total, width), rows_cut, cols_cut


@SERVER.tool(action="read_csv", read_only=True)
def read_csv(
    state: SheetsState,
    file_path: str,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    has_header: bool = True,
    row_limit: Annotated[int, Field(ge=1, le=100000)] = 1000,
) -> CsvRead:
    """Read a CSV file as rows (values are text, as stored).

    Args:
        file_path: The .csv (or .tsv/.txt) file.
        delimiter: One character; detected from the content when omitted.
        encoding: Text encoding, e.g. 'utf-8' (a BOM is skipped) or 'latin-1'.
        has_header: Whether the first row holds column names.
        row_limit: Cap on data rows returned.
    """
    path = state.ctx.files.at(file_path, argument="file_path", allow_root=False).require("file")
    virtual = path.virtual
    limit = row_limit + (1 if has_header else 0)
    rows, total, used = read_csv_rows(path, virtual, delimiter=delimiter, encoding=encoding, row_limit=limit)
    headers = rows[0] if has_header and rows else None
    body = rows[1:] if has_header else rows
    data_total = total - (1 if has_header and total else 0)
    data: dict[str, Any] = {
        "file_path": virtual,
        "delimiter": used,
        "headers": headers,
        "rows": body,
        "total_rows": data_total,
        "returned_rows": len(body),
    }
    if data_total > len(body):
        data["truncated"] = True
        data["continuation"] = (
            f"{data_total - len(body)} more rows; raise row_limit (max 100000) or use read_tab with cell_range"
        )
    return CsvRead.from_fields(data)


@SERVER.tool(action="list_tabs", read_only=True)
def list_tabs_in_spreadsheet(state: SheetsState, file_path: str) -> TabList:
    """List a workbook's tabs with their index, name, visibility and used size.

    Args:
        file_path: The workbook (.xlsx).
    """
    path, virtual = workbook_path(state, file_path)
    return TabList(file_path=virtual, tabs=tab_names(state, path, virtual))


@SERVER.tool(action="filter", read_only=True)
def filter_tab(
    state: SheetsState,
    file_path: str,
    filters: list[FilterCondition],
    tab_index: TabRef = 0,
    match_all: bool = True,
    has_header: bool = True,
    max_results: Annotated[int, Field(ge=1, le=5000)] = 100,
) -> FilterResult:
    """Rows of a tab matching filter conditions. Read-only: the file is never modified.

    Args:
        file_path: The workbook (.xlsx) or .csv file.
        filters: [{"column": "Region" | "C" | 3, "operator": "equals", "value": "EMEA"}]; operators: equals,
            not_equals, contains, not_contains, starts_with, ends_with, greater_than, less_than,
            greater_or_equal, less_or_equal, is_empty, is_not_empty.
        tab_index: 0-based tab position or tab name.
        match_all: True = every condition must hold (AND); False = any (OR).
        has_header: Whether row 1 holds column names (they key each result row).
        max_results: Cap on rows returned.
    """
    if not filters:
        raise ToolError(
            ErrorCode.invalid_argument, "filters: at least one condition is needed", argument="filters"
        )
    data, _ = tab_contents(
        state, file_path, tab_index, None, include_formulas=False, max_rows=10000, max_cols=500, compact=False
    )
    rows: list[list[Any]] = data["rows"]
    headers = [str(h) if h is not None else "" for h in rows[0]] if has_header and rows else []
    first_data = 1 if has_header else 0
    columns = [_filter_column(f.column, headers, i) for i, f in enumerate(filters)]
    found: list[dict[str, Any]] = []
    matched = 0
    for offset, row in enumerate(rows[first_data:], start=first_data + 1):
        if all(v is None for v in row):
            continue
        checks = [
            matches(row[c] if c < len(row) else None, f.operator, f.value)
            for c, f in zip(columns, filters, strict=True)
        ]
        if all(checks) if match_all else any(checks):
            matched += 1
            if len(found) < max_results:
                values: Any = (
                    {(headers[i] or get_column_letter(i + 1)): v for i, v in enumerate(row)}
                    if headers
                    else row
                )
                found.append({"row": offset, "values": values})
    output: dict[str, Any] = {
        "file_path": data["file_path"],
        "tab_name": data["tab_name"],
        "matched": matched,
        "returned": len(found),
        "rows": found,
    }
    if data.get("truncated"):
        output["note"] = "only the first 10000 rows and 500 columns were searched"
    return FilterResult.from_fields(output)


def _filter_column(column: str | int, headers: list[str], index: int) -> int:

    argument = f"filters[{index}].column"
    if isinstance(column, int) and not isinstance(column, bool):
        if column >= 1:
            return column - 1
    elif isinstance(column, str):
        text = column.strip()
        lowered = [h.strip().lower() for h in headers]
        if text.lower() in lowered:
            return lowered.index(text.lower())
        if text.isalpha() and len(text) <= 3:
            return column_index_from_string(text.upper()) - 1
    known = ", ".join(repr(h) for h in headers if h) or "none"
    raise ToolError(
        ErrorCode.invalid_argument, f"{argument}: no column {column!r} (headers: {known})", argument="filters"
    )
