"""Charts from workbook data: read a range of an .xlsx in the root, build a native chart."""

from __future__ import annotations

from typing import Any

from atoll.errors import ErrorCode
from mcp_servers._core import WorldPath
from mcp_servers._core.errors import ToolError
from mcp_servers._office.package import open_package

CHART_TYPES = (
    "bar",
    "column",
    "stacked_bar",
    "stacked_column",
    "line",
    "pie",
    "doughnut",
    "area",
    "scatter",
    "radar",
)
#: Most cells read from a workbook for one chart.
MAX_CELLS = 10_000


def _chart_enum(chart_type: str) -> Any:
    from pptx.enum.chart import XL_CHART_TYPE

    return {
        "bar": XL_CHART_TYPE.BAR_CLUSTERED,
        "column": XL_CHART_TYPE.COLUMN_CLUSTERED,
        "stacked_bar": XL_CHART_TYPE.BAR_STACKED,
        "stacked_column": XL_CHART_TYPE.COLUMN_STACKED,
        "line": XL_CHART_TYPE.LINE_MARKERS,
        "pie": XL_CHART_TYPE.PIE,
        "doughnut": XL_CHART_TYPE.DOUGHNUT,
        "area": XL_CHART_TYPE.AREA,
        "scatter": XL_CHART_TYPE.XY_SCATTER,
        "radar": XL_CHART_TYPE.RADAR,
    }[chart_type]


def read_range(
    path: WorldPath, virtual: str, sheet_name: str, data_range: str, *, include_header: bool = True
) -> list[list[Any]]:
    """The values of ``data_range`` on ``sheet_name`` (cached values for formulas).

    Raises ToolError for an encrypted/corrupt workbook, an unknown sheet (listing the
    sheets), a malformed or too large range.
    """
    from openpyxl import load_workbook
    from openpyxl.utils.cell import range_boundaries

    workbook = open_package(
        path,
        lambda stream: load_workbook(stream, read_only=True, data_only=True),
        virtual=virtual,
        kind="xlsx",
        argument="spreadsheet_path",
        tree=False,  # read_only: openpyxl streams the sheets
    )
    try:
        if sheet_name not in workbook.sheetnames:
            raise ToolError(
                ErrorCode.not_found,
                f"sheet_name: {virtual} has no sheet {sheet_name!r} (sheets: {', '.join(workbook.sheetnames)})",
                argument="sheet_name",
            )
        try:
            min_col, min_row, max_col, max_row = range_boundaries(data_range.replace("$", "").strip())
        except Exception as exc:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"data_range: {data_range!r} is not a range like 'A1:C5'",
                argument="data_range",
            ) from exc
        if None in (min_col, min_row, max_col, max_row):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"data_range: {data_range!r} must name both corners, like 'A1:C5'",
                argument="data_range",
            )
        if (max_col - min_col + 1) * (max_row - min_row + 1) > MAX_CELLS:
            raise ToolError(
                ErrorCode.too_large,
                f"data_range: {data_range} has more than {MAX_CELLS} cells",
                argument="data_range",
            )
        sheet = workbook[sheet_name]
        rows = [
            list(row)
            for row in sheet.iter_rows(
                min_row=min_row, max_row=max_row, min_col=min_col, max_col=max_col, values_only=True
            )
        ]
    finally:
        workbook.close()
    if len(rows) < (2 if include_header else 1) or len(rows[0]) < 2:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"data_range: {data_range} needs a category column and at least one series"
            + (" below a header row" if include_header else ""),
            argument="data_range",
        )
    return rows


def _number(value: Any, cell: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"data_range: cell {cell} holds {value!r}, not a number",
            argument="data_range",
        ) from None


def chart_data(
    rows: list[list[Any]], data_range: str, chart_type: str, *, include_header: bool = True
) -> Any:
    """Chart data from rows: first row = series names (unless ``include_header`` is false:
    then series are named "Series N"), first column = categories (scatter: x values)."""
    from openpyxl.utils.cell import get_column_letter, range_boundaries
    from pptx.chart.data import CategoryChartData, XyChartData

    min_col, min_row, _max_col, _max_row = range_boundaries(data_range.replace("$", "").strip())
    if include_header:
        header, body, first = rows[0], rows[1:], 1
    else:
        header, body, first = [None] * len(rows[0]), rows, 0

    def where(r: int, c: int) -> str:
        return f"{get_column_letter(min_col + c)}{min_row + r - 1 + first}"

    if chart_type == "scatter":
        data = XyChartData()
        for c in range(1, len(header)):
            series = data.add_series(str(header[c] if header[c] is not None else f"Series {c}"))
            for r, row in enumerate(body, start=1):
                x, y = _number(row[0], where(r, 0)), _number(row[c], where(r, c))
                if x is not None and y is not None:
                    series.add_data_point(x, y)
        return data
    category_data = CategoryChartData()
    category_data.categories = ["" if row[0] is None else str(row[0]) for row in body]
    for c in range(1, len(header)):
        name = str(header[c]) if header[c] is not None else f"Series {c}"
        category_data.add_series(name, [_number(row[c], where(r, c)) for r, row in enumerate(body, start=1)])
    return category_data


def check_chart_type(chart_type: str) -> None:
    """Refuse a chart type that is not one of CHART_TYPES (ToolError ``invalid_argument``)."""
    if chart_type not in CHART_TYPES:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"chart_type: expected one of {', '.join(CHART_TYPES)}, got {chart_type!r}",
            argument="chart_type",
        )


def add_chart(
    slide: Any, data: Any, chart_type: str, title: str | None, box: tuple[Any, Any, Any, Any], legend: bool
) -> Any:
    check_chart_type(chart_type)
    frame = slide.shapes.add_chart(_chart_enum(chart_type), *box, data)
    chart = frame.chart
    if title:
        chart.has_title = True
        chart.chart_title.text_frame.text = title
    chart.has_legend = legend
    return frame
