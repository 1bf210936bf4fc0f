"""Writing PDFs from content blocks with embedded Unicode fonts.

Blocks become HTML laid out by MuPDF's Story engine (line breaking, tables, page
breaks, HarfBuzz shaping for Arabic and other complex scripts). Text is set in DejaVu
Sans (Debian ``fonts-dejavu-core``: Latin, Greek, Cyrillic, Hebrew, Arabic, ...) with
Noto Sans as an alternative; characters neither covers (CJK) fall back to MuPDF's
built-in Droid Sans Fallback. Every font used is embedded (subset), so any reader shows
the text and extraction returns it.
"""

from __future__ import annotations

import html
import io
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from mcp_servers._core import ToolError, WorldPath

pymupdf = lazy_module("pymupdf")  # ~0.8 s of CPU: imported on the first call that reads a PDF

FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/noto")
PAGE_SIZES = {"A4": "a4", "Letter": "letter", "Legal": "legal", "A3": "a3", "A5": "a5"}
MARGIN = 54  # points (3/4 inch)
MAX_BLOCKS = 5000


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Heading(_Block):
    type: Literal["heading"]
    text: str
    level: int = Field(1, ge=1, le=6)


class Paragraph(_Block):
    type: Literal["paragraph"]
    text: str
    bold: bool = False
    italic: bool = False


class Bullets(_Block):
    type: Literal["bullets", "bullet_list", "numbered_list"]
    items: list[str]


class Table(_Block):
    type: Literal["table"]
    rows: list[list[str | int | float | bool | None]]
    header: bool = Field(True, description="Whether the first row is a header row.")


class PageBreak(_Block):
    type: Literal["page_break"]


Block = Annotated[Heading | Paragraph | Bullets | Table | PageBreak, Field(discriminator="type")]


def _font_css() -> tuple[str, str | None]:
    """CSS @font-face rules for the first font family found, and the folder holding it."""
    families = (
        ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf"),
        ("NotoSans-Regular.ttf", "NotoSans-Bold.ttf", "NotoSans-Italic.ttf", "NotoSans-BoldItalic.ttf"),
    )
    for folder in FONT_DIRS:
        for regular, bold, italic, bold_italic in families:
            if not os.path.exists(os.path.join(folder, regular)):
                continue
            rules = [f"@font-face {{font-family: body; src: url({regular});}}"]
            for name, weight, style in (
                (bold, "bold", "normal"),
                (italic, "normal", "italic"),
                (bold_italic, "bold", "italic"),
            ):
                if os.path.exists(os.path.join(folder, name)):
                    rules.append(
                        f"@font-face {{font-family: body; font-weight: {weight}; font-style: {style}; src: url({name});}}"
                    )
            return "\n".join(rules), folder
    return "", None


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value)).replace("\n", "<br/>")


def blocks_html(blocks: list[Any]) -> str:
    """The HTML body for a list of blocks."""
    parts: list[str] = []
    pending_break = False
    for block in blocks:
        if block.type == "page_break":
            pending_break = True
            continue
        style = ' style="page-break-before: always"' if pending_break else ""
        pending_break = False
        if block.type == "heading":
            parts.append(f"<h{block.level}{style}>{_text(block.text)}</h{block.level}>")
        elif block.type == "paragraph":
            text = _text(block.text)
            if block.bold:
                text = f"<b>{text}</b>"
            if block.italic:
                text = f"<i>{text}</i>"
            parts.append(f"<p{style}>{text}</p>")
        elif block.type in ("bullets", "bullet_list", "numbered_list"):
            tag = "ol" if block.type == "numbered_list" else "ul"
            items = "".join(f"<li>{_text(item)}</li>" for item in block.items)
            parts.append(f"<{tag}{style}>{items}</{tag}>")
        elif block.type == "table":
            rows = []
            for index, row in enumerate(block.rows):
                cell = "th" if block.header and index == 0 else "td"
                rows.append("<tr>" + "".join(f"<{cell}>{_text(v)}</{cell}>" for v in row) + "</tr>")
            parts.append(f"<table{style}>{''.join(rows)}</table>")
    if pending_break:
        parts.append('<p style="page-break-before: always"></p>')
    return "\n".join(parts)


#: The metadata keys written into a PDF (others are ignored).
METADATA_KEYS = ("title", "author", "subject", "keywords", "creator")


def render_pdf(blocks: list[Any], *, page_size: str, metadata: dict[str, str] | None) -> bytes:
    """The bytes of a PDF showing ``blocks``. Raises ToolError for bad sizes or too many blocks."""
    if len(blocks) > MAX_BLOCKS:
        raise ToolError(
            ErrorCode.too_large, f"content: {len(blocks)} blocks (limit {MAX_BLOCKS})", argument="content"
        )
    if page_size not in PAGE_SIZES:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"page_size: {page_size!r} is not one of {', '.join(PAGE_SIZES)}",
            argument="page_size",
        )
    fonts, folder = _font_css()
    css = (
        fonts
        + "\n* {font-family: body; font-size: 11pt; line-height: 1.35;}"
        + "\nh1 {font-size: 20pt;} h2 {font-size: 16pt;} h3 {font-size: 13pt;} h4, h5, h6 {font-size: 11pt;}"
        + "\ntable {border-collapse: collapse; margin: 6pt 0;} td, th {border: 0.5pt solid #555; padding: 3pt;}"
        + "\nth {font-weight: bold; background-color: #eeeeee;}"
    )
    archive = pymupdf.Archive(folder) if folder else None
    story = pymupdf.Story(html=blocks_html(blocks) or "<p></p>", user_css=css, archive=archive)
    out = io.BytesIO()
    writer = pymupdf.DocumentWriter(out)
    mediabox = pymupdf.paper_rect(PAGE_SIZES[page_size])
    where = mediabox + (MARGIN, MARGIN, -MARGIN, -MARGIN)
    more = True
    pages = 0
    while more:
        device = writer.begin_page(mediabox)
        more, _ = story.place(where)
        story.draw(device)
        writer.end_page()
        pages += 1
        if pages > 10000:
            raise ToolError(ErrorCode.too_large, "content: more than 10000 pages", argument="content")
    writer.close()
    # Story embeds whole fonts (the CJK fallback alone is ~4 MB): keep only the glyphs used.
    document = pymupdf.open(stream=out.getvalue(), filetype="pdf")
    try:
        document.subset_fonts()
        if metadata:
            document.set_metadata({k: str(v) for k, v in metadata.items() if k in METADATA_KEYS})
        return document.tobytes(garbage=3, deflate=True)
    finally:
        document.close()


def output_path(ctx: Any, directory: str, file_name: str) -> tuple[WorldPath, str]:
    """Where create_pdf writes ('.pdf' added when missing); ToolError if it exists."""
    from mcp_servers._core import validate_id

    validate_id(file_name, argument="file_name")
    name = file_name.strip()
    if not name.lower().endswith(".pdf"):
        name += ".pdf"
    folder = ctx.files.at(directory, argument="directory").require("dir", must_exist=False)
    target = folder.child(name, "file_name").require("file", must_exist=False)
    virtual = target.virtual
    if target.exists():
        raise ToolError(
            ErrorCode.already_exists, f"file_name: {virtual} already exists", argument="file_name"
        )
    return target, virtual
