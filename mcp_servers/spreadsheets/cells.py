"""Validating cell references, ranges and values given by agents."""

from __future__ import annotations

import math
import re
from typing import Any

from atoll.errors import ErrorCode
from atoll.formats.xlsx import column_letter, column_number
from mcp_servers._core import ToolError

MAX_ROW = 1_048_576
MAX_COL = 16_384
MAX_TEXT = 32_767  # Excel's limit for one cell
_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?([0-9]{1,7})$")
_LAST_COLUMN = 18_278  # ZZZ, the largest column three letters name

# openpyxl's column and range helpers, written out so that building the server and reading a
# workbook import no openpyxl (it loads numpy and PIL); tests/mcp_servers/test_spreadsheets.py
# checks them against openpyxl's.


def get_column_letter(column: int) -> str:
    """1 -> ``"A"``, 28 -> ``"AB"``; ValueError outside 1..18278 (as openpyxl)."""
    if not 1 <= column <= _LAST_COLUMN:
        raise ValueError(f"Invalid column index {column}")
    return column_letter(column)


def column_index_from_string(letters: str) -> int:
    """``"ab"`` -> 28; ValueError unless one to three letters (as openpyxl)."""
    upper = letters.upper()
    if not (1 <= len(upper) <= 3 and upper.isascii() and upper.isalpha()):
        raise ValueError(f"{letters!r} is not a valid column name. Column names are from A to ZZZ")
    return column_number(upper)


def range_boundaries(text: str) -> tuple[int, int, int, int]:
    """(min_col, min_row, max_col, max_row) of ``"A1"`` or ``"A1:C9"`` (``$`` allowed), as
    openpyxl's ``range_boundaries`` gives for these forms; ValueError for anything else."""
    parts = text.split(":")
    matches = [_CELL.match(part) for part in parts]
    if len(parts) > 2 or not all(matches):
        raise ValueError(f"{text} is not a valid coordinate or range")
    corners = [(column_index_from_string(m.group(1)), int(m.group(2))) for m in matches if m]
    (min_col, min_row), (max_col, max_row) = corners[0], corners[-1]
    return min_col, min_row, max_col, max_row


def quote_sheetname(name: str) -> str:
    """``"Q1 'plan'"`` -> ``"'Q1 ''plan'''"`` (openpyxl's ``quote_sheetname``)."""
    return "'" + name.replace("'", "''") + "'"


def check_cell(cell: str | None, *, argument: str = "cell") -> str:
    """Normalised ``A1`` reference (upper case, no ``$``); ToolError when invalid."""
    match = _CELL.match((cell or "").strip())
    if not match:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {cell!r} is not a cell reference like 'B3'",
            argument=argument,
        )
    column = column_index_from_string(match.group(1).upper())
    row = int(match.group(2))
    if not (1 <= row <= MAX_ROW and 1 <= column <= MAX_COL):
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: {cell!r} is outside the sheet", argument=argument
        )
    return f"{get_column_letter(column)}{row}"


def check_range(value: str | None, *, argument: str = "range") -> str:
    """Normalised ``A1:C9`` range (a single cell is allowed); ToolError when invalid."""
    text = (value or "").strip().replace("$", "")
    if "!" in text:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: give the range without a sheet name (got {value!r})",
            argument=argument,
        )
    parts = text.split(":")
    if len(parts) == 1:
        return check_cell(parts[0], argument=argument)
    if len(parts) != 2:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: {value!r} is not a range like 'A1:C10'",
            argument=argument,
        )
    start, end = check_cell(parts[0], argument=argument), check_cell(parts[1], argument=argument)
    min_col, min_row, max_col, max_row = range_boundaries(f"{start}:{end}")
    if min_col > max_col or min_row > max_row:
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: {value!r} ends before it starts", argument=argument
        )
    return f"{start}:{end}"


def parse_range(value: str, *, argument: str = "cell_range") -> tuple[int, int, int, int]:
    """(min_row, min_col, max_row, max_col) of a range or cell; also accepts whole columns
    ('A:C') and rows ('2:5'), bounded later by the sheet's used area (max values 0)."""
    text = (value or "").strip().replace("$", "")
    whole_columns = re.match(r"^([A-Za-z]{1,3}):([A-Za-z]{1,3})$", text)
    if whole_columns:
        a = column_index_from_string(whole_columns.group(1).upper())
        b = column_index_from_string(whole_columns.group(2).upper())
        return 1, min(a, b), 0, max(a, b)
    whole_rows = re.match(r"^([0-9]{1,7}):([0-9]{1,7})$", text)
    if whole_rows:
        a, b = int(whole_rows.group(1)), int(whole_rows.group(2))
        if a < 1:
            raise ToolError(
                ErrorCode.invalid_argument, f"{argument}: {value!r} is not a valid range", argument=argument
            )
        return min(a, b), 1, max(a, b), 0
    normal = check_range(text, argument=argument)
    min_col, min_row, max_col, max_row = range_boundaries(normal if ":" in normal else f"{normal}:{normal}")
    return min_row, min_col, max_row, max_col


def check_value(value: Any, *, argument: str = "value") -> Any:
    """A JSON scalar accepted as a cell value (formulas are text starting with '=')."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: {value} cannot be stored in a cell", argument=argument
        )
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ToolError(
                ErrorCode.too_large,
                f"{argument}: text of {len(value)} characters (a cell holds {MAX_TEXT})",
                argument=argument,
            )
        if any(ord(ch) < 32 and ch not in "\t\n\r" for ch in value):
            raise ToolError(
                ErrorCode.invalid_argument, f"{argument}: text contains control characters", argument=argument
            )
    elif value is not None and not isinstance(value, bool | int | float):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: expected a number, text, boolean or null, got {type(value).__name__}",
            argument=argument,
        )
    return value


def column_letter_of(column: str | int, *, argument: str = "column") -> str:
    """Column letter for 'B', 'b' or 2."""
    if isinstance(column, int) and not isinstance(column, bool):
        if 1 <= column <= MAX_COL:
            return get_column_letter(column)
    elif isinstance(column, str) and re.match(r"^[A-Za-z]{1,3}$", column.strip()):
        letters = column.strip().upper()
        if column_index_from_string(letters) <= MAX_COL:
            return letters
    raise ToolError(
        ErrorCode.invalid_argument,
        f"{argument}: {column!r} is not a column letter or number",
        argument=argument,
    )
