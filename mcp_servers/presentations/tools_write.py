"""The presentations server's writing tools (registered on SERVER from server.py)."""

from __future__ import annotations

from typing import Annotated, Any, overload

from pydantic import Field, ValidationError, WithJsonSchema

from atoll.errors import ErrorCode, first_problem
from mcp_servers._core.definition import TABLE_CELL_SCHEMA
from mcp_servers._core.errors import ToolError
from mcp_servers._office.package import save_package
from mcp_servers._office.properties import write_core_properties
from mcp_servers.presentations.editing import apply_operation
from mcp_servers.presentations.files import DeckFiles
from mcp_servers.presentations.models import BulletItem, DeckMetadata, SlideOperation, SlideSpec, TableSpec
from mcp_servers.presentations.results import DeckCreated, DeckDeleted, SlideAdded, SlidesEdited
from mcp_servers.presentations.server import SERVER, FilePath, slide_summary
from mcp_servers.presentations.slides import fill_slide, find_layout, move_slide

Inches = Annotated[float | None, Field(ge=0, le=100, description="inches")]
Size = Annotated[float | None, Field(gt=0, le=100, description="inches")]


@overload
def _emu(value: float) -> int: ...
@overload
def _emu(value: float | None) -> int | None: ...
def _emu(value: float | None) -> int | None:
    return None if value is None else int(value * 914400)


def _box(
    deck: Any, left: float | None, top: float | None, width: float | None, height: float | None
) -> tuple[int, int, int, int]:
    """A shape box in EMU; defaults fill the content area under the title."""
    slide_width, slide_height = deck.slide_width, deck.slide_height
    x = _emu(left) if left is not None else int(0.5 * 914400)
    y = _emu(top) if top is not None else int(1.5 * 914400)
    w = _emu(width) if width is not None else slide_width - x - int(0.5 * 914400)
    h = _emu(height) if height is not None else slide_height - y - int(0.5 * 914400)
    if w <= 0 or h <= 0:
        raise ToolError(
            ErrorCode.invalid_argument,
            "the shape would have no width or height at that position",
            argument="left",
        )
    return x, y, w, h


@SERVER.tool(action="create")
def create_deck(
    files: DeckFiles,
    directory: Annotated[
        str, Field(description="folder for the new file, e.g. /Outputs (created if missing)")
    ],
    file_name: Annotated[str, Field(description="name ending in .pptx")],
    slides: list[SlideSpec],
    metadata: DeckMetadata | None = None,
    overwrite: bool = False,
) -> DeckCreated:
    """Create a .pptx deck (16:9) from slide specs.

    Each slide: {layout: title | title_and_content | section_header | two_content |
    title_only | blank, title, subtitle, bullets: [text | {text, level}], table: {rows,
    header}, columns: [[bullets], [bullets]] (two_content), notes}.

    Args:
        metadata: title, author, subject, keywords, comments, category.
        overwrite: replace an existing file of that name.
    """
    from pptx import Presentation
    from pptx.util import Emu

    path, virtual = files.new_file(directory, file_name, overwrite=overwrite)
    deck = Presentation()
    deck.slide_width, deck.slide_height = Emu(12192000), Emu(6858000)  # 13.333 x 7.5 in (16:9)
    write_core_properties(deck, metadata, files.ctx.user_name)
    for spec in slides:
        fill_slide(deck.slides.add_slide(find_layout(deck, spec.layout)), spec)
    size = save_package(deck, path)
    return DeckCreated(file_path=virtual, slide_count=len(slides), bytes=size, created=True)


@SERVER.tool(action="delete", destructive=True)
def delete_deck(files: DeckFiles, file_path: FilePath) -> DeckDeleted:
    """Delete a .pptx file."""
    path, virtual = files.locate(file_path)
    path.unlink()
    return DeckDeleted(file_path=virtual, deleted=True)


_TEXT = {"type": "string"}
#: What add_slide's ``content`` may hold (it is validated as a SlideSpec), spelled out so that
#: the schema is an object with properties (an open map is refused by Gemini: atoll.tool_schemas).
_CONTENT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": _TEXT,
        "subtitle": _TEXT,
        "bullets": {"type": "array", "items": _TEXT},
        "table": {
            "type": "object",
            "properties": {
                "rows": {"type": "array", "items": {"type": "array", "items": TABLE_CELL_SCHEMA}},
                "header": {"type": "boolean"},
            },
        },
        "columns": {"type": "array", "items": {"type": "array", "items": _TEXT}},
        "notes": _TEXT,
    },
}


@SERVER.tool(action="add_slide")
def add_slide(
    files: DeckFiles,
    file_path: FilePath,
    index: Annotated[
        int | None, Field(ge=0, description="position of the new slide (default: at the end)")
    ] = None,
    layout: str = "title_and_content",
    title: str | None = None,
    subtitle: str | None = None,
    bullets: list[str | BulletItem] | None = None,
    table: TableSpec | None = None,
    columns: list[str | list[str | BulletItem]] | None = None,
    notes: str | None = None,
    slide_index: Annotated[
        int | None, Field(ge=0, description="same as index (the reference's name)")
    ] = None,
    content: Annotated[
        dict[str, Any] | None,
        WithJsonSchema(_CONTENT_SCHEMA),
        Field(description="{title, subtitle, bullets, table, columns, notes} instead of flat arguments"),
    ] = None,
) -> SlideAdded:
    """Add a slide at a position, with a layout and content.

    Layouts: title, title_and_content, section_header, two_content, title_only, blank, or
    a layout name of the deck.
    """
    if index is not None and slide_index is not None and index != slide_index:
        raise ToolError(ErrorCode.invalid_argument, "give index or slide_index, not both", argument="index")
    index = index if index is not None else slide_index
    flat = {
        "title": title,
        "subtitle": subtitle,
        "bullets": bullets,
        "table": table,
        "columns": columns,
        "notes": notes,
    }
    if content:
        clash = [name for name, value in flat.items() if value is not None and name in content]
        if clash:
            raise ToolError(
                ErrorCode.invalid_argument, f"content: {', '.join(clash)} given twice", argument="content"
            )
        flat.update(content)
    try:
        spec = SlideSpec(layout=layout, **{name: value for name, value in flat.items() if value is not None})
    except ValidationError as exc:
        problem = first_problem(exc, top="")
        raise ToolError(ErrorCode.invalid_argument, f"content: {problem}", argument="content") from None
    with files.edit(file_path) as (deck, virtual):
        count = len(deck.slides)
        if index is not None and index > count:
            raise ToolError(
                ErrorCode.not_found,
                f"index: the deck has {count} slide(s); the new slide can go at 0..{count}",
                argument="index",
            )
        fill_slide(deck.slides.add_slide(find_layout(deck, layout)), spec)
        position = count if index is None else index
        if position != count:
            move_slide(deck, count, position)
        summary = slide_summary(deck, position)
    return SlideAdded.from_fields({"file_path": virtual, "slide_count": count + 1, **summary})


@SERVER.tool(action="edit")
def edit_slides(
    files: DeckFiles,
    file_path: FilePath,
    operations: list[SlideOperation],
    metadata: DeckMetadata | None = None,
) -> SlidesEdited:
    """Apply edits in order, all or nothing (the file is written only if every one succeeds).

    Operations: replace_text {search, replace, slide_index (null = every slide), match_case}
    changes only the runs that contain the text, keeping their formatting; update_title
    {slide_index, title}; update_subtitle {slide_index, subtitle}; add_bullets /
    replace_bullets {slide_index, bullets, placeholder}; clear_placeholder; set_notes
    {slide_index, notes}; append_table {slide_index, rows, header}; update_table_cell /
    format_table_cell {slide_index, table_idx, row, column, text | bold, italic, underline,
    font_size, font_color, bg_color}; apply_text_formatting / add_hyperlink {slide_index,
    placeholder, paragraph_index, run_index, ... | url}; delete_slide {slide_index};
    duplicate_slide {slide_index, position} (images and charts kept); move_slide
    {slide_index, to_index}. The reference's names (index, items, update_slide_title,
    set_bullets, append_bullets, ...) are accepted. Indices refer to the deck as left by
    the previous one.

    Args:
        metadata: core properties to update (title, author, subject, ...).
    """
    if not operations and metadata is None:
        raise ToolError(
            ErrorCode.invalid_argument, "operations: give at least one operation", argument="operations"
        )
    with files.edit(file_path) as (deck, virtual):
        results = [apply_operation(deck, operation, number) for number, operation in enumerate(operations)]
        write_core_properties(deck, metadata, default_author=None)
        count = len(deck.slides)
    return SlidesEdited(file_path=virtual, applied=results, slide_count=count)
