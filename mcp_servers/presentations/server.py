"""The presentations server definition and its reading tools (writing tools: tools_write.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from atoll.errors import ErrorCode
from atoll.formats.pptx import deck_markdown, public, render_slide, slide_info
from mcp_servers._core.definition import ServerDefinition
from mcp_servers._core.errors import ToolError
from mcp_servers._core.results import ImageBlock, ToolOutput
from mcp_servers.presentations.files import DeckFiles
from mcp_servers.presentations.pictures import find_picture
from mcp_servers.presentations.results import Deck, DeckImage, SlideRead, SlidesText
from mcp_servers.presentations.slides import get_slide

SERVER = ServerDefinition(
    "presentations",
    consolidated_name="slides",
    description=(
        "PowerPoint decks (.pptx) under the filesystem root: create decks, add, duplicate, move "
        "and delete slides, replace text keeping its formatting, bullets, notes, tables, shapes, "
        "images and native charts from spreadsheet data; read slides as markdown."
    ),
    state=DeckFiles,
)

FilePath = Annotated[str, Field(description="the .pptx file, e.g. /Decks/board.pptx")]
SlideIndex = Annotated[int, Field(ge=0, description="0-based slide index")]
#: Cap on the text one read returns.
MAX_READ_CHARS = 100_000


@SERVER.tool(action="read_range", read_only=True)
def read_slides(
    files: DeckFiles,
    file_path: FilePath,
    start: Annotated[int, Field(ge=0, description="first character of the deck's markdown to return")] = 0,
    end: Annotated[
        int | None, Field(ge=0, description="character after the last one (default start + 50,000)")
    ] = None,
) -> ToolOutput[SlidesText]:
    """Read the deck as markdown, by character range (for long decks).

    The result says the total length; continue with start = the returned end.
    """
    deck, virtual = files.open(file_path)
    _slides, text = deck_markdown(deck)
    stop = min(len(text), end if end is not None else start + 50_000, start + MAX_READ_CHARS)
    if stop < start:
        raise ToolError(ErrorCode.invalid_argument, f"end: {end} is before start {start}", argument="end")
    chunk = text[start:stop]
    data = {
        "file_path": virtual,
        "start": start,
        "end": stop,
        "total_chars": len(text),
        "text": chunk,
        "has_more": stop < len(text),
    }
    footer = f"\n…more: continue with start={stop} (total {len(text)} chars)" if stop < len(text) else ""
    return ToolOutput(SlidesText.from_fields(data), text=chunk + footer)


@SERVER.tool(action="read_deck", read_only=True)
def read_completedeck(files: DeckFiles, file_path: FilePath) -> ToolOutput[Deck]:
    """Read every slide as markdown with structured shapes.

    Shows titles, text, bullets (with levels), tables, charts (with their data), images
    (with annotations for read_image/modify_image) and speaker notes.
    """
    deck, virtual = files.open(file_path)
    slides, text = deck_markdown(deck)
    truncated = len(text) > MAX_READ_CHARS
    shown = text[:MAX_READ_CHARS] + ("\n…truncated: use read_slides with start/end" if truncated else "")
    data = {"file_path": virtual, "slide_count": len(slides), "slides": slides, "truncated": truncated}
    return ToolOutput(Deck.from_fields(data), text=f"{virtual}: {len(slides)} slide(s)\n\n{shown}")


@SERVER.tool(action="read_slide", read_only=True)
def read_individualslide(
    files: DeckFiles, file_path: FilePath, slide_index: SlideIndex
) -> ToolOutput[SlideRead]:
    """Read one slide in detail, shape by shape.

    Every shape with its index, name, kind, position and size (inches), text paragraphs
    with levels, table cells, chart data, image annotations, and the notes.
    """
    deck, virtual = files.open(file_path)
    info = slide_info(get_slide(deck, slide_index), slide_index)
    text = render_slide(info)
    shapes = "\n".join(
        f'  shape {s["index"]} "{s["name"]}" {s["kind"]} at ({s["left"]}, {s["top"]}) in, {s["width"]}x{s["height"]} in'
        for s in info["shapes"]
    )
    data = {"file_path": virtual, "slide_count": len(deck.slides), **public(info)}
    return ToolOutput(SlideRead.from_fields(data), text=f"{text}\nShapes:\n{shapes}" if shapes else text)


@SERVER.tool(action="read_image", read_only=True)
def read_image(
    files: DeckFiles,
    file_path: FilePath,
    annotation: Annotated[str, Field(description="slide.<i>.image.<k> as shown in reads")],
) -> ToolOutput[DeckImage]:
    """Return one picture of the deck (as MCP image content) with its position and size."""
    deck, virtual = files.open(file_path)
    slide_index, name, shape = find_picture(deck, annotation)
    image = shape.image
    data = {
        "file_path": virtual,
        "annotation": name,
        "slide_index": slide_index,
        "name": shape.name,
        "mime_type": image.content_type,
        "bytes": len(image.blob),
        "width_inches": round(shape.width / 914400, 2),
        "height_inches": round(shape.height / 914400, 2),
    }
    if len(image.blob) > 10 * 1024 * 1024:
        raise ToolError(
            ErrorCode.too_large,
            f"annotation: {name} is {len(image.blob)} bytes (limit 10 MiB)",
            argument="annotation",
        )
    text = f"{name} in {virtual}: {image.content_type}, {data['width_inches']}x{data['height_inches']} in"
    return ToolOutput(
        DeckImage.from_fields(data), text=text, images=[ImageBlock(image.blob, image.content_type)]
    )


def slide_summary(deck: Any, index: int) -> dict[str, Any]:
    info = slide_info(deck.slides[index], index)
    return {"slide_index": index, "layout": info["layout"], "title": info["title"]}
