"""What the document tools return (their output schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_servers._core.outputs import ResultModel


class OnFile(ResultModel):
    file_path: str


class Heading(ResultModel):
    id: str
    level: int | None = None
    text: str


class PageSetup(ResultModel):
    section_index: int
    orientation: str
    page_width_inches: float | None = None
    page_height_inches: float | None = None
    margins_inches: dict[str, float | None]


class DocumentOverview(OnFile):
    title: str
    author: str
    paragraphs: int
    tables: int
    images: int
    comments: int
    tracked_changes: int
    total_pages: int
    printed_pages: int
    words: int
    headings: list[Heading]
    sections: list[PageSetup]


class DocumentContent(OnFile):
    """One page of blocks; each block has its ``id`` (the identifier edits take)."""

    total_pages: int
    page_index: int | None = None
    sections: Any = None
    section_index: int | None = None
    total_blocks: int
    start_block: int
    blocks: list[dict[str, Any]]
    truncated: bool
    next_start_block: int | None = None


class ImageInfo(OnFile):
    """An embedded image: its annotation (``image.N``), where it sits and its size."""

    annotation: str | None = None
    run: str | None = None
    width_inches: float | None = None
    height_inches: float | None = None


class ImageRead(ImageInfo):
    mime_type: str
    bytes: int


class ImageAdded(ImageInfo):
    identifier: str
    images_in_document: int


class HeaderFooterSection(ResultModel):
    section_index: int
    area: str
    linked_to_previous: bool | None = None
    text: str
    paragraphs: list[dict[str, Any]]


class HeaderFooter(OnFile):
    sections: list[HeaderFooterSection]


class Comments(OnFile):
    """``comments`` when reading; ``comment_id`` with ``added`` or ``deleted`` otherwise."""

    comments: list[dict[str, Any]] | None = None
    comment_id: int | str | None = None
    added: bool | None = None
    deleted: bool | None = None


class DocumentCreated(OnFile):
    blocks: int
    bytes: int
    created: bool


class DocumentDeleted(OnFile):
    deleted: bool


class TextChanged(OnFile):
    identifier: str
    result: Any = Field(description="what was done to the element")


class ContentInserted(OnFile):
    identifier: str
    inserted_elements: int


class TableAdded(ContentInserted):
    rows: int
    cols: int


class FormattingApplied(OnFile):
    identifier: str
    applied: dict[str, Any] | list[Any]


class PageLayout(OnFile):
    sections: list[PageSetup]
