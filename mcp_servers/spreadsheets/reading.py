"""Reading workbooks and CSV files: tabs, cell ranges, filters. Never writes a file.

Values come from the cached values stored in the file. A formula without one (a file
written by a script that did not compute it) is computed by LibreOffice on a scratch copy
(once per file version) and shown with ``computed: true`` semantics in its value; if that
fails the cell reads ``#NOT_COMPUTED: <reason>``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lxml import etree

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.bounds import InputTooLarge
from atoll.formats.libreoffice import RecalcError
from atoll.formats.xlsx import XlsxReader, display
from mcp_servers._core import ToolError, WorldPath
from mcp_servers._office.package import bound_error
from mcp_servers.spreadsheets.cells import get_column_letter, parse_range
from mcp_servers.spreadsheets.values import dummy_function_fallback, not_computed
from mcp_servers.spreadsheets.workbook import SheetsState, WorkbookFile, sheet_position

# openpyxl's date handling is imported on the first numeric cell with a number format.
_numbers = lazy_module("openpyxl.styles.numbers")
_datetime = lazy_module("openpyxl.utils.datetime")

MAX_CSV_BYTES = 64 * 1024 * 1024


@dataclass
class Grid:
    """A rectangle of a sheet: display values, formulas (A1 -> text) and where it sits."""

    tab_name: str
    min_row: int
    min_col: int
    values: list[list[Any]]
    formulas: dict[str, str]
    sheet_rows: int
    sheet_cols: int
    tab_index: int = 0

    @property
    def max_row(self) -> int:
        return self.min_row + len(self.values) - 1

    @property
    def max_col(self) -> int:
        return self.min_col + (len(self.values[0]) if self.values else 1) - 1

    @property
    def range(self) -> str:
        return (
            f"{get_column_letter(self.min_col)}{self.min_row}:{get_column_letter(self.max_col)}{self.max_row}"
        )


@contextmanager
def _reader(path: WorkbookFile, virtual: str) -> Iterator[XlsxReader]:
    """An :class:`XlsxReader` over the bytes read through the root's descriptor; malformed
    files become ToolError ``bad_data``."""
    try:
        reader = XlsxReader(path.stream(), name=virtual)
    except InputTooLarge as exc:
        raise bound_error(exc, "file_path") from None
    except zipfile.BadZipFile:
        raise ToolError(
            ErrorCode.bad_data,
            f"file_path: {virtual} is not a readable .xlsx workbook (not a zip archive)",
            argument="file_path",
        ) from None
    except Exception as exc:
        raise ToolError(
            ErrorCode.bad_data,
            f"file_path: {virtual} is not a readable .xlsx workbook ({type(exc).__name__})",
            argument="file_path",
        ) from None
    try:
        yield reader
    except InputTooLarge as exc:
        raise bound_error(exc, "file_path") from None
    except (etree.LxmlError, KeyError, ValueError, IndexError, zipfile.BadZipFile, EOFError) as exc:
        raise ToolError(
            ErrorCode.bad_data,
            f"file_path: {virtual} has a malformed sheet ({type(exc).__name__})",
            argument="file_path",
        ) from None
    finally:
        reader.close()


def tab_names(state: SheetsState, path: WorkbookFile, virtual: str) -> list[dict[str, Any]]:
    with _reader(path, virtual) as reader:
        tabs = []
        for sheet in reader.sheets:
            rows, cols = reader.dimension(sheet)
            tabs.append(
                {
                    "index": sheet.index,
                    "name": sheet.name,
                    "state": sheet.state,
                    "rows": rows,
                    "columns": cols,
                    "used_range": f"A1:{get_column_letter(max(cols, 1))}{max(rows, 1)}",
                }
            )
        return tabs


def read_grid(
    state: SheetsState,
    path: WorkbookFile,
    virtual: str,
    tab: int | str,
    cell_range: str | None,
    *,
    max_rows: int,
    max_cols: int,
) -> tuple[Grid, bool, bool]:
    """The values (and formulas) of a range, capped; returns (grid, rows_cut, cols_cut)."""
    with _reader(path, virtual) as reader:
        tab_index = sheet_position([s.name for s in reader.sheets], tab, argument="tab_index")
        sheet = reader.sheets[tab_index]
        sheet_rows, sheet_cols = reader.dimension(sheet)
        if cell_range:
            min_row, min_col, max_row, max_col = parse_range(cell_range)
            max_row = max_row or max(sheet_rows, min_row)
            max_col = max_col or max(sheet_cols, min_col)
        else:
            min_row, min_col, max_row, max_col = 1, 1, max(sheet_rows, 1), max(sheet_cols, 1)
        rows_cut = max_row - min_row + 1 > max_rows
        cols_cut = max_col - min_col + 1 > max_cols
        max_row = min(max_row, min_row + max_rows - 1)
        max_col = min(max_col, min_col + max_cols - 1)
        grid: list[list[Any]] = [[None] * (max_col - min_col + 1) for _ in range(max_row - min_row + 1)]
        formulas: dict[str, str] = {}
        formats: dict[tuple[int, int], str] = {}
        missing: list[tuple[int, int, str]] = []
        for cell in reader.cells(sheet, min_row, min_col, max_row, max_col):
            r, c = cell.row - min_row, cell.col - min_col
            grid[r][c] = cell.value
            if cell.formula is not None:
                formulas[f"{get_column_letter(cell.col)}{cell.row}"] = cell.formula
                if cell.value is None:
                    missing.append((r, c, cell.formula))
                    if cell.number_format:
                        formats[(cell.row, cell.col)] = cell.number_format
    if missing:
        _fill_missing(state, path, sheet.name, grid, missing, min_row, min_col, formats)
    shown = [[display(v) for v in line] for line in grid]
    grid_out = Grid(sheet.name, min_row, min_col, shown, formulas, sheet_rows, sheet_cols, tab_index)
    return grid_out, rows_cut, cols_cut


def _fill_missing(
    state: SheetsState,
    path: WorkbookFile,
    sheet_name: str,
    grid: list[list[Any]],
    missing: list[tuple[int, int, str]],
    min_row: int,
    min_col: int,
    formats: dict[tuple[int, int], str],
) -> None:
    pending = []
    for r, c, formula in missing:
        found, fallback = dummy_function_fallback(formula)
        if found:
            grid[r][c] = fallback
        else:
            pending.append((r, c))
    if not pending:
        return
    try:
        computed = state.compute(path)
        sheet = computed.get(sheet_name, {})
    except RecalcError as exc:
        for r, c in pending:
            grid[r][c] = not_computed(str(exc))
        return
    for r, c in pending:
        kind, value = sheet.get((min_row + r, min_col + c), ("s", ""))
        number_format = formats.get((min_row + r, min_col + c))
        if kind == "n" and number_format and _numbers.is_date_format(number_format):
            with contextlib.suppress(ValueError, OverflowError):
                value = _datetime.from_excel(value)
        grid[r][c] = value


def read_csv_rows(
    path: WorldPath, virtual: str, *, delimiter: str | None, encoding: str, row_limit: int
) -> tuple[list[list[str]], int, str]:
    """(rows up to ``row_limit``, total rows, delimiter used). Raises ToolError."""
    with path.open() as handle:
        if os.fstat(handle.fileno()).st_size > MAX_CSV_BYTES:
            raise ToolError(
                ErrorCode.too_large,
                f"file_path: {virtual} is larger than {MAX_CSV_BYTES >> 20} MB",
                argument="file_path",
            )
        raw = handle.read()
    if b"\x00" in raw[:8192]:
        raise ToolError(
            ErrorCode.bad_data, f"file_path: {virtual} is a binary file, not CSV text", argument="file_path"
        )
    try:
        text = raw.decode(
            "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
        )
    except LookupError:
        raise ToolError(
            ErrorCode.invalid_argument, f"encoding: unknown encoding {encoding!r}", argument="encoding"
        ) from None
    except UnicodeDecodeError as exc:
        raise ToolError(
            ErrorCode.bad_data,
            f"file_path: {virtual} is not valid {encoding} (byte {exc.start}); try encoding='latin-1'",
            argument="file_path",
        ) from None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:20000], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    if len(delimiter) != 1:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"delimiter: must be one character, got {delimiter!r}",
            argument="delimiter",
        )
    rows: list[list[str]] = []
    total = 0
    try:
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            total += 1
            if len(rows) < row_limit:
                rows.append(row)
    except csv.Error as exc:
        raise ToolError(
            ErrorCode.bad_data, f"file_path: {virtual} is not valid CSV ({exc})", argument="file_path"
        ) from None
    return rows, total, delimiter


def matches(value: Any, operator: str, target: Any) -> bool:
    """Whether a cell value passes one filter condition (numbers compared as numbers)."""
    if operator == "is_empty":
        return value is None or value == ""
    if operator == "is_not_empty":
        return not (value is None or value == "")
    if value is None:
        return False
    number, target_number = _number(value), _number(target)
    if operator in ("greater_than", "less_than", "greater_or_equal", "less_or_equal"):
        # Numbers compare as numbers, anything else as lower-case text.
        a: Any
        b: Any
        if number is not None and target_number is not None:
            a, b = number, target_number
        else:
            a, b = str(value).lower(), str(target).lower()
        return {
            "greater_than": a > b,
            "less_than": a < b,
            "greater_or_equal": a >= b,
            "less_or_equal": a <= b,
        }[operator]
    if operator in ("equals", "not_equals"):
        if number is not None and target_number is not None:
            same = number == target_number
        else:
            same = str(value).strip().lower() == str(target).strip().lower()
        return same if operator == "equals" else not same
    text, needle = str(value).lower(), str(target).lower()
    return {
        "contains": needle in text,
        "not_contains": needle not in text,
        "starts_with": text.startswith(needle),
        "ends_with": text.endswith(needle),
    }[operator]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None
