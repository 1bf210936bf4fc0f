"""What the PDF tools return (their output schemas)."""

from __future__ import annotations

from typing import Any

from mcp_servers._core.outputs import ResultModel


class PageRead(ResultModel):
    """One page's text and the engine that produced it (pymupdf, pypdf, ocr or none)."""

    page: int
    text: str
    engine: str | None = None
    images: list[dict[str, Any]] | None = None
    strikethrough: list[str] | None = None
    note: str | None = None


class PagesRead(ResultModel):
    file_path: str
    page_count: int
    pages: list[PageRead]
    truncated: bool | None = None
    continuation: str | None = None


class PdfImage(ResultModel):
    """An image sent as MCP image content; these are its details."""

    file_path: str
    annotation: str | None = None
    page: int
    width: int
    height: int
    dpi: int | float | None = None
    mime_type: str


class SearchMatch(ResultModel):
    page: int
    line: int
    column: int
    match: str
    context: str
    engine: str | None = None


class PdfSearch(ResultModel):
    file_path: str
    query: str
    page_count: int
    total_matches: int
    results: list[SearchMatch]
    truncated: bool | None = None
    continuation: str | None = None
    pages_not_searched: list[int] | None = None
    note: str | None = None


class PdfCreated(ResultModel):
    file_path: str
    pages: int
    bytes: int
