"""What the spreadsheet tools return (their output schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_servers._core.outputs import ResultModel

#: A cell's value as read: text, number, boolean, ISO date or empty.
CellValue = Any


class Recalculation(ResultModel):
    """How the formulas of a written workbook were recalculated (LibreOffice, or skipped)."""

    status: str
    formulas: int | None = None
    seconds: float | None = None
    reason: str | None = None


class Written(ResultModel):
    file_path: str
    recalculation: Recalculation


class SpreadsheetCreated(Written):
    sheets: list[str]
    rows_written: int


class SpreadsheetDeleted(ResultModel):
    file_path: str
    deleted: bool


class TabAdded(Written):
    tab_name: str
    tab_index: int
    rows_written: int


class TabDeleted(Written):
    deleted_tab: str
    tabs: list[str]


class SpreadsheetEdited(Written):
    applied: list[str] = Field(description="one line per operation applied, in order")


class CellWritten(Written):
    tab_name: str
    cell: str


class CellCleared(CellWritten):
    previous_value: CellValue = None


class ChartCreated(Written):
    sheet: str
    chart_type: str
    series: int
    points: int
    anchor: str


class TabRead(ResultModel):
    """A tab's range: ``rows`` (a grid), or ``cells`` ({"B2": value}) when compact."""

    file_path: str
    tab_index: int
    tab_name: str
    range: str
    sheet_rows: int
    sheet_columns: int
    rows: list[list[CellValue]] | None = None
    cells: dict[str, CellValue] | None = None
    formulas: dict[str, str] | None = None
    truncated: bool | None = None
    continuation: str | None = None


class CsvRead(ResultModel):
    file_path: str
    delimiter: str
    headers: list[str] | None = None
    rows: list[list[CellValue]]
    total_rows: int
    returned_rows: int
    truncated: bool | None = None
    continuation: str | None = None


class TabInfo(ResultModel):
    index: int
    name: str
    state: str
    rows: int
    columns: int
    used_range: str


class TabList(ResultModel):
    file_path: str
    tabs: list[TabInfo]


class FilteredRow(ResultModel):
    row: int
    values: dict[str, CellValue]


class FilterResult(ResultModel):
    file_path: str
    tab_name: str
    matched: int
    returned: int
    rows: list[FilteredRow]
