"""What the presentation tools return (their output schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_servers._core.outputs import ResultModel


class OnDeck(ResultModel):
    file_path: str


class SlidesText(OnDeck):
    """A character range of the deck as markdown."""

    start: int
    end: int
    total_chars: int
    text: str
    has_more: bool


class Slide(ResultModel):
    """One slide: its shapes (``kind``, name, position in inches, text, table, chart, image annotation)."""

    slide_index: int
    layout: str
    hidden: bool
    title: str
    shapes: list[dict[str, Any]]
    notes: str


class Deck(OnDeck):
    slide_count: int
    slides: list[Slide]
    truncated: bool


class SlideRead(OnDeck, Slide):
    slide_count: int


class DeckImage(OnDeck):
    annotation: str
    slide_index: int
    name: str
    mime_type: str
    bytes: int
    width_inches: float
    height_inches: float


class DeckCreated(OnDeck):
    slide_count: int
    bytes: int
    created: bool


class DeckDeleted(OnDeck):
    deleted: bool


class SlideAdded(OnDeck):
    slide_count: int
    slide_index: int
    layout: str
    title: str


class SlidesEdited(OnDeck):
    applied: list[Any] = Field(description="one entry per operation applied, in order")
    slide_count: int


class ImagePlaced(OnDeck):
    slide_index: int
    annotation: str
    name: str


class ImageChanged(OnDeck):
    """``deleted`` when the picture was removed, else its new position and size in inches."""

    annotation: str
    deleted: bool | None = None
    x: float | None = None
    y: float | None = None
    width: float | None = None
    height: float | None = None


class ShapeInserted(OnDeck):
    slide_index: int
    name: str


class ChartInserted(ShapeInserted):
    chart_type: str
    categories: int
    series: int


class TableInserted(ShapeInserted):
    rows: int
    cols: int


class ShapeAdded(ShapeInserted):
    shape_id: int
