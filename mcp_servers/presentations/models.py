"""Argument models of the presentations server (slides, tables, operations, metadata)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class BulletItem(BaseModel):
    """A bullet with an indent level (0 = top level)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    text: str
    level: int = Field(0, ge=0, le=4)


class TableSpec(BaseModel):
    """A table: rows of cell values; the first row is a bold header unless header=false."""

    model_config = ConfigDict(extra="forbid")
    rows: list[list[Any]]
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


class DeckMetadata(BaseModel):
    """Core properties written into the deck."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    title: str | None = None
    author: str | None = None
    subject: str | None = None
    keywords: str | None = None
    comments: str | None = None
    category: str | None = None


OperationType = Literal[
    "replace_text",
    "update_title",
    "update_subtitle",
    "add_bullets",
    "replace_bullets",
    "set_notes",
    "delete_slide",
    "duplicate_slide",
    "move_slide",
]


class SlideOperation(BaseModel):
    """One edit. Fields by type: replace_text {search, replace, slide_index (null = all
    slides), match_case}; update_title {slide_index, title}; update_subtitle {slide_index,
    subtitle}; add_bullets / replace_bullets {slide_index, bullets}; set_notes
    {slide_index, notes}; delete_slide {slide_index}; duplicate_slide {slide_index};
    move_slide {slide_index, to_index}."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    type: OperationType
    slide_index: int | None = None
    search: str | None = None
    replace: str | None = None
    match_case: bool = True
    title: str | None = None
    subtitle: str | None = None
    bullets: list[str | BulletItem] | None = None
    notes: str | None = None
    to_index: int | None = None
