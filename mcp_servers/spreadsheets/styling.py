"""Edits that change how cells look or behave: formats, validations, conditional formats,
images, and sheet renames (which also rewrite formulas that name the sheet)."""

from __future__ import annotations

import io
import re
from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core import ToolError
from mcp_servers._office.colors import NAMED_COLORS
from mcp_servers.spreadsheets.cells import check_cell, quote_sheetname

# openpyxl is imported on the first edit that needs it, not when the server is built.
_rule = lazy_module("openpyxl.formatting.rule")
_styles = lazy_module("openpyxl.styles")
_validation = lazy_module("openpyxl.worksheet.datavalidation")

_INVALID_TITLE = re.compile(r"[\[\]:*?/\\]")


def color(value: str | None, *, argument: str = "color") -> str | None:
    """ARGB hex for '#FF0000', 'FF0000', 'FFFF0000' or a few names; ToolError otherwise."""
    if value is None:
        return None
    text = value.strip().lstrip("#")
    text = NAMED_COLORS.get(text.lower(), text)
    if re.fullmatch(r"[0-9A-Fa-f]{6}", text):
        return "FF" + text.upper()
    if re.fullmatch(r"[0-9A-Fa-f]{8}", text):
        return text.upper()
    raise ToolError(
        ErrorCode.invalid_argument,
        f"{argument}: {value!r} is not a hex color like 'FF0000'",
        argument=argument,
    )


def _cells(ws: Any, cell_range: str) -> list[Any]:
    if ":" not in cell_range:
        return [ws[cell_range]]
    return [cell for row in ws[cell_range] for cell in row]


def format_cells(ws: Any, cell_range: str, op: Any) -> int:
    """Apply font/fill/alignment/border/number format to every cell of the range."""
    font_color = color(op.font_color, argument="font_color")
    fill_color = color(op.fill_color, argument="fill_color")
    side = _styles.Side(style=op.border) if op.border and op.border != "none" else _styles.Side(style=None)
    cells = _cells(ws, cell_range)
    for cell in cells:
        font = cell.font  # read only: the new Font below is built from its values
        changes: dict[str, Any] = {}
        for name, attribute in (("bold", "b"), ("italic", "i")):
            if getattr(op, name) is not None:
                changes[attribute] = getattr(op, name)
        if op.underline is not None:
            changes["u"] = "single" if op.underline else None
        if op.font_size is not None:
            changes["sz"] = op.font_size
        if op.font_name is not None:
            changes["name"] = op.font_name
        if font_color is not None:
            changes["color"] = font_color
        if changes:
            cell.font = _styles.Font(
                name=changes.get("name", font.name),
                sz=changes.get("sz", font.sz),
                b=changes.get("b", font.b),
                i=changes.get("i", font.i),
                u=changes.get("u", font.u),
                color=changes.get("color", font.color),
                strike=font.strike,
                vertAlign=font.vertAlign,
            )
        if fill_color is not None:
            cell.fill = _styles.PatternFill(fill_type="solid", start_color=fill_color, end_color=fill_color)
        if op.horizontal_alignment or op.vertical_alignment or op.wrap_text is not None:
            old = cell.alignment
            cell.alignment = _styles.Alignment(
                horizontal=op.horizontal_alignment or old.horizontal,
                vertical=op.vertical_alignment or old.vertical,
                wrap_text=op.wrap_text if op.wrap_text is not None else old.wrap_text,
                indent=old.indent,
                text_rotation=old.text_rotation,
            )
        if op.border is not None:
            cell.border = _styles.Border(left=side, right=side, top=side, bottom=side)
        if op.number_format is not None:
            cell.number_format = op.number_format
    return len(cells)


def add_data_validation(ws: Any, cell_range: str, op: Any) -> None:
    kind = "textLength" if op.validation_type == "text_length" else op.validation_type
    formula1, formula2 = op.formula1, op.formula2
    if kind == "list":
        if op.values:
            text = ",".join(str(v) for v in op.values)
            if '"' in text or len(text) > 255:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    "values: a list validation holds at most 255 characters, no quotes",
                )
            formula1 = f'"{text}"'
        if not formula1:
            raise ToolError(
                ErrorCode.invalid_argument, "a list validation needs values or formula1 (e.g. '$A$1:$A$5')"
            )
    elif kind == "custom":
        if not formula1:
            raise ToolError(ErrorCode.invalid_argument, "a custom validation needs formula1")
    else:
        if formula1 is None:
            raise ToolError(
                ErrorCode.invalid_argument, f"a {op.validation_type} validation needs formula1 (a bound)"
            )
        if op.operator in ("between", "notBetween", None) and formula2 is None:
            raise ToolError(
                ErrorCode.invalid_argument, f"operator {op.operator or 'between'} needs formula1 and formula2"
            )
    validation = _validation.DataValidation(
        type=kind,
        operator=op.operator if kind not in ("list", "custom") else None,
        formula1=formula1.lstrip("=") if formula1 and not formula1.startswith('"') else formula1,
        formula2=formula2.lstrip("=") if formula2 else None,
        allow_blank=op.allow_blank,
        showErrorMessage=True,
        error=op.error_message,
        showInputMessage=bool(op.prompt),
        prompt=op.prompt,
    )
    validation.add(cell_range)
    ws.add_data_validation(validation)


def add_conditional_formatting(ws: Any, cell_range: str, op: Any) -> None:
    fill_color = color(op.fill_color, argument="fill_color")
    font_color = color(op.font_color, argument="font_color")
    fill = (
        _styles.PatternFill(fill_type="solid", start_color=fill_color, end_color=fill_color)
        if fill_color
        else None
    )
    font = _styles.Font(color=font_color, b=op.bold) if (font_color or op.bold is not None) else None
    if op.rule_type == "cell_is":
        if not op.operator or not op.values:
            raise ToolError(ErrorCode.invalid_argument, "a cell_is rule needs operator and values")
        needed = 2 if op.operator in ("between", "notBetween") else 1
        if len(op.values) != needed:
            raise ToolError(ErrorCode.invalid_argument, f"operator {op.operator} needs {needed} value(s)")
        if fill is None and font is None:
            raise ToolError(ErrorCode.invalid_argument, "a cell_is rule needs fill_color, font_color or bold")
        formula = [_operand(v) for v in op.values]
        rule = _rule.CellIsRule(operator=op.operator, formula=formula, fill=fill, font=font)
    elif op.rule_type == "formula":
        expression = op.formula or (str(op.values[0]) if op.values else None)
        if not expression:
            raise ToolError(ErrorCode.invalid_argument, "a formula rule needs formula (e.g. '$B2>100')")
        if fill is None and font is None:
            raise ToolError(ErrorCode.invalid_argument, "a formula rule needs fill_color, font_color or bold")
        rule = _rule.FormulaRule(formula=[expression.lstrip("=")], fill=fill, font=font)
    elif op.rule_type == "color_scale":
        start = color(op.start_color or "F8696B", argument="start_color")
        end = color(op.end_color or "63BE7B", argument="end_color")
        rule = _rule.ColorScaleRule(start_type="min", start_color=start, end_type="max", end_color=end)
    else:
        bar = color(op.color or "638EC6", argument="color")
        rule = _rule.DataBarRule(start_type="min", end_type="max", color=bar)
    ws.conditional_formatting.add(cell_range, rule)


def _operand(value: str | int | float) -> str:
    if isinstance(value, int | float):
        return str(value)
    text = str(value).strip()
    if text.startswith("="):
        return text[1:]
    try:
        float(text)
        return text
    except ValueError:
        return '"' + text.replace('"', '""') + '"'


def add_image(state: Any, ws: Any, op: Any) -> None:
    from openpyxl.drawing.image import Image
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    path = state.ctx.files.at(op.image_path, argument="image_path", allow_root=False).require("file")
    data = path.read_bytes()
    try:
        with PILImage.open(io.BytesIO(data)) as probe:
            probe.verify()
        image = Image(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ToolError(
            ErrorCode.bad_data, f"image_path: {op.image_path} is not a readable image ({type(exc).__name__})"
        ) from None
    if op.width or op.height:
        ratio = image.height / image.width if image.width else 1
        image.width = op.width or int((op.height or image.height) / ratio)
        image.height = op.height or int(image.width * ratio)
    ws.add_image(image, check_cell(op.cell))


def rename_sheet(workbook: Any, ws: Any, new_name: str) -> None:
    """Rename ``ws`` and rewrite references to it in formulas and defined names."""
    name = new_name.strip()
    if (
        not name
        or len(name) > 31
        or _INVALID_TITLE.search(name)
        or name.startswith("'")
        or name.endswith("'")
    ):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"new_name: {new_name!r} is not a valid sheet name (1-31 characters, none of []:*?/\\)",
            argument="new_name",
        )
    if any(other.title.lower() == name.lower() for other in workbook.worksheets if other is not ws):
        raise ToolError(
            ErrorCode.already_exists, f"new_name: a sheet named {name!r} already exists", argument="new_name"
        )
    old = ws.title
    ws.title = name
    pattern = re.compile(
        r"(?<![A-Za-z0-9_.'])(?:" + re.escape(old) + r"|'" + re.escape(old.replace("'", "''")) + r"')!"
    )
    replacement = quote_sheetname(name) + "!"
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if (
                    cell.data_type == "f"
                    and isinstance(cell.value, str)
                    and old in cell.value.replace("''", "'")
                ):
                    cell.value = _outside_strings(cell.value, lambda part: pattern.sub(replacement, part))
    for defined in workbook.defined_names.values():
        if defined.attr_text:
            defined.attr_text = pattern.sub(replacement, defined.attr_text)


def _outside_strings(formula: str, change: Any) -> str:
    """Apply ``change`` to the parts of a formula outside double-quoted strings."""
    pieces = re.split(r'("(?:[^"]|"")*")', formula)
    return "".join(piece if piece.startswith('"') else change(piece) for piece in pieces)
