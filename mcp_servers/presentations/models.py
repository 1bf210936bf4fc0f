"""Argument models of the presentations server (slides, tables, operations, metadata)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_servers._core.definition import TableCell
from mcp_servers._office.properties import CoreProperties


class BulletItem(BaseModel):
    """A bullet with an indent level (0 = top level)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    text: str
    level: int = Field(0, ge=0, le=4)


class TableSpec(BaseModel):
    """A table: rows of cell values; the first row is a bold header unless header=false."""

    model_config = ConfigDict(extra="forbid")
    rows: list[list[TableCell]]
    header: bool = True
    font_size: float | None = Field(None, gt=0, le=100)


class SlideSpec(BaseModel):
    """One slide. layout: title | title_and_content | section_header | two_content |
    title_only | blank (or a layout name of the deck). columns (two_content): one list of
    bullets per column."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    layout: str = "title_and_content"
    title: str | None = None
    subtitle: str | None = None
    bullets: list[str | BulletItem] | None = None
    table: TableSpec | None = None
    columns: list[str | list[str | BulletItem]] | None = None
    notes: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _loose_shapes(cls, value: Any) -> Any:
        """Accept the shapes models often send: bullets as {"items": [...]}, a table as a bare
        list of rows, columns as [{"bullets"|"items": [...]}], "speaker_notes" for notes."""
        if not isinstance(value, dict):
            return value
        value = dict(value)
        if isinstance(value.get("bullets"), dict) and set(value["bullets"]) <= {"items"}:
            value["bullets"] = value["bullets"].get("items")
        if isinstance(value.get("table"), list):
            value["table"] = {"rows": value["table"]}
        if isinstance(value.get("columns"), list):
            value["columns"] = [
                column.get("bullets", column.get("items")) if isinstance(column, dict) else column
                for column in value["columns"]
            ]
        if "speaker_notes" in value and value.get("notes") is None:
            value["notes"] = value.pop("speaker_notes")
        return value


class DeckMetadata(CoreProperties):
    """Core properties written into the deck."""


OperationType = Literal[
    "replace_text",
    "update_title",
    "update_subtitle",
    "add_bullets",
    "replace_bullets",
    "clear_placeholder",
    "set_notes",
    "append_table",
    "update_table_cell",
    "format_table_cell",
    "apply_text_formatting",
    "add_hyperlink",
    "delete_slide",
    "duplicate_slide",
    "move_slide",
]
#: The reference's operation names -> ours (both are accepted).
OPERATION_ALIASES = {
    "update_slide_title": "update_title",
    "update_slide_subtitle": "update_subtitle",
    "set_bullets": "replace_bullets",
    "append_bullets": "add_bullets",
}


class SlideOperation(BaseModel):
    """One edit. Fields by type (the reference's names in brackets are accepted too):
    replace_text {search, replace, slide_index (null = all slides), match_case,
    include_notes};
    update_title [update_slide_title] {slide_index, title}; update_subtitle
    [update_slide_subtitle] {slide_index, subtitle}; add_bullets [append_bullets] /
    replace_bullets [set_bullets] {slide_index, bullets [items], placeholder};
    clear_placeholder {slide_index, placeholder}; set_notes {slide_index, notes};
    append_table {slide_index, rows, header, placeholder}; update_table_cell {slide_index,
    table_idx, row, column, text}; format_table_cell {slide_index, table_idx, row, column,
    bold, italic, underline, font_size, font_color, bg_color}; apply_text_formatting
    {slide_index, placeholder, paragraph_index, run_index, bold, italic, underline,
    font_size, font_color}; add_hyperlink {slide_index, placeholder, url, paragraph_index,
    run_index}; delete_slide {slide_index}; duplicate_slide {slide_index, position};
    move_slide {slide_index, to_index}. ``index`` is accepted for ``slide_index``.
    Placeholders: title, subtitle, body, left, right."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    type: OperationType
    slide_index: int | None = None
    search: str | None = None
    replace: str | None = None
    match_case: bool = True
    include_notes: bool = False
    title: str | None = None
    subtitle: str | None = None
    bullets: list[str | BulletItem] | None = None
    notes: str | None = None
    to_index: int | None = None
    position: int | None = None
    placeholder: str | None = None
    rows: list[list[TableCell]] | None = None
    header: bool = True
    table_idx: int = 0
    row: int | None = None
    column: int | None = None
    text: str | None = None
    bold: bool | None = None
    italic: bool | None = None
    underline: bool | None = None
    font_size: float | None = Field(None, gt=0, le=400)
    font_color: str | None = None
    bg_color: str | None = None
    url: str | None = None
    paragraph_index: int | None = None
    run_index: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _reference_names(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        value = dict(value)
        kind = value.get("type")
        if isinstance(kind, str) and kind in OPERATION_ALIASES:
            value["type"] = OPERATION_ALIASES[kind]
        for alias, name in (("index", "slide_index"), ("items", "bullets")):
            if alias in value:
                if value.get(name) is not None and value[alias] != value[name]:
                    raise ValueError(f"give '{name}' or '{alias}', not both")
                value[name] = value.pop(alias)
        return value
