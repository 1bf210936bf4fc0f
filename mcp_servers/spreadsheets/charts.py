"""Native Excel charts from a data range (openpyxl chart objects)."""

from __future__ import annotations

from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core import ToolError
from mcp_servers.spreadsheets.cells import (
    check_cell,
    column_index_from_string,
    column_letter_of,
    get_column_letter,
    parse_range,
)

# openpyxl is imported on the first chart, not when the server is built.
_chart = lazy_module("openpyxl.chart")

CHART_TYPES = {"bar": "BarChart", "line": "LineChart", "pie": "PieChart"}


def add_chart(
    ws: Any,
    data_range: str,
    *,
    chart_type: str,
    title: str | None,
    position: str | None,
    categories_column: str | int | None,
    include_header: bool,
) -> dict[str, Any]:
    """Add a chart of ``data_range`` (series in columns) to ``ws``; returns a summary.

    ``categories_column`` (a letter or 1-based number) gives the labels; by default the
    first column of the range holds them when the range has more than one column.
    """
    min_row, min_col, max_row, max_col = parse_range(data_range, argument="data_range")
    if not max_row or not max_col:
        raise ToolError(
            ErrorCode.invalid_argument,
            "data_range: give a bounded range like 'A1:C10'",
            argument="data_range",
        )
    if categories_column is not None:
        category_col = column_index_from_string(
            column_letter_of(categories_column, argument="categories_column")
        )
        first_series = min_col if category_col != min_col else min_col + 1
    elif max_col > min_col:
        category_col, first_series = min_col, min_col + 1
    else:
        category_col, first_series = None, min_col
    if first_series > max_col:
        raise ToolError(
            ErrorCode.invalid_argument,
            "data_range: no value columns besides the categories",
            argument="data_range",
        )
    data_first_row = min_row + 1 if include_header else min_row
    if data_first_row > max_row:
        raise ToolError(
            ErrorCode.invalid_argument, "data_range: no data rows below the header", argument="data_range"
        )
    chart = getattr(_chart, CHART_TYPES[chart_type])()
    if title:
        chart.title = title
    data = _chart.Reference(ws, min_col=first_series, max_col=max_col, min_row=min_row, max_row=max_row)
    chart.add_data(data, titles_from_data=include_header)
    if category_col is not None:
        chart.set_categories(
            _chart.Reference(
                ws, min_col=category_col, max_col=category_col, min_row=data_first_row, max_row=max_row
            )
        )
    anchor = check_cell(position, argument="position") if position else _free_anchor(ws, max_col)
    ws.add_chart(chart, anchor)
    return {
        "chart_type": chart_type,
        "series": max_col - first_series + 1,
        "points": max_row - data_first_row + 1,
        "anchor": anchor,
    }


def _free_anchor(ws: Any, max_col: int) -> str:
    return f"{get_column_letter(max(ws.max_column, max_col) + 2)}2"
