"""Argument models of the documents server (content blocks, metadata, formatting)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_servers._core.definition import TableCell
from mcp_servers._office.properties import CoreProperties

BlockType = Literal[
    "paragraph", "heading", "bullet_list", "numbered_list", "table", "page_break", "section_break", "image"
]
Alignment = Literal["left", "center", "right", "justify"]


class RunSpec(BaseModel):
    """A piece of a paragraph with its own formatting."""

    model_config = ConfigDict(extra="forbid")
    text: str
    bold: bool | None = None
    italic: bool | None = None
    underline: bool | None = None


class ListItem(BaseModel):
    """A list item with an indent level (0 = top level, at most 2)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    level: int = Field(0, ge=0, le=2)


class ContentBlock(BaseModel):
    """One block of content. Fields used by each type:

    paragraph: text (or runs), style, alignment, bold, italic; heading: text, level (0 =
    Title, 1-9); bullet_list / numbered_list: items (strings or {text, level}); table: rows
    (list of rows of cell values), header (bold first row), style; page_break: nothing;
    section_break: orientation; image: path (an image file in the root), width_inches,
    height_inches.
    """

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    type: BlockType
    text: str | None = None
    runs: list[RunSpec] | None = None
    level: int | None = Field(None, ge=0, le=9)
    items: list[str | ListItem] | None = None
    rows: list[list[TableCell]] | None = None
    header: bool = True
    style: str | None = None
    alignment: Alignment | None = None
    bold: bool | None = None
    italic: bool | None = None
    orientation: Literal["portrait", "landscape"] | None = None
    path: str | None = None
    width_inches: float | None = Field(None, gt=0, le=50)
    height_inches: float | None = Field(None, gt=0, le=50)

    @model_validator(mode="before")
    @classmethod
    def _loose_shapes(cls, value: Any) -> Any:
        """Accept the shapes models often send: "content" for text, a table's "headers"
        separately from its rows, "width"/"height" for an image's inches."""
        if not isinstance(value, dict):
            return value
        value = dict(value)
        if isinstance(value.get("content"), str) and value.get("text") is None:
            value["text"] = value.pop("content")
        if value.get("type") == "table" and isinstance(value.get("headers"), list):
            value["rows"] = [value.pop("headers"), *(value.get("rows") or [])]
            value.setdefault("header", True)
        for short in ("width", "height"):
            if short in value and f"{short}_inches" not in value:
                value[f"{short}_inches"] = value.pop(short)
        return value


class DocumentMetadata(CoreProperties):
    """Core properties written into the document."""
