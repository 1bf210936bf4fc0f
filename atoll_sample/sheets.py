"""Write .xlsx workbooks (several tabs, live formulas, number formats) deterministically."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openpyxl import Workbook
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import column_index_from_string, get_column_letter

from atoll_sample._files import FROZEN_AT, normalize_ooxml

_HEADER_FILL = PatternFill("solid", fgColor="DDE7F0")


@dataclass
class Sheet:
    """One tab: ``rows[0]`` is the header row; strings starting with ``=`` are formulas.

    ``number_formats`` maps a column letter to an Excel number format applied below the
    header; ``cached`` maps a formula cell (``B7``) to the value a Google Sheets export
    would have cached for it (used for ``__xludf.DUMMYFUNCTION`` cells).
    """

    name: str
    rows: list[list[Any]]
    number_formats: dict[str, str] = field(default_factory=dict)
    widths: dict[str, float] = field(default_factory=dict)
    cached: dict[str, str] = field(default_factory=dict)
    freeze: str | None = "A2"
    bold_rows: list[int] = field(default_factory=list)


def write_workbook(path: Path, sheets: list[Sheet], *, creator: str = "atoll sample") -> None:
    """Write ``sheets`` to ``path`` (parents created); byte-identical for identical input."""
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook = Workbook()
    workbook.remove(workbook.active)
    workbook.properties.creator = creator
    workbook.properties.created = FROZEN_AT
    workbook.properties.modified = FROZEN_AT
    cached: dict[str, dict[str, str]] = {}
    for position, spec in enumerate(sheets, start=1):
        sheet = workbook.create_sheet(spec.name)
        for row in spec.rows:
            sheet.append(row)
        for cell in sheet[1]:
            cell.font = Font(bold=True)
            cell.fill = _HEADER_FILL
        for row_number in spec.bold_rows:
            for cell in sheet[row_number]:
                cell.font = Font(bold=True)
        for column, number_format in spec.number_formats.items():
            for (cell,) in sheet.iter_rows(min_row=2, min_col=_col(column), max_col=_col(column)):
                if isinstance(cell.value, int | float) or _is_formula(cell.value):
                    cell.number_format = number_format
        for column_index in range(1, sheet.max_column + 1):
            letter = get_column_letter(column_index)
            longest = max((len(str(c.value)) for c in sheet[letter] if c.value is not None), default=8)
            sheet.column_dimensions[letter].width = spec.widths.get(letter, min(max(10, longest + 2), 48))
        if spec.freeze:
            sheet.freeze_panes = spec.freeze
        if spec.cached:
            cached[f"xl/worksheets/sheet{position}.xml"] = spec.cached
    workbook.save(path)
    normalize_ooxml(path, cached_values=cached)


def _col(letter: str) -> int:
    return column_index_from_string(letter)


def _is_formula(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("=")
