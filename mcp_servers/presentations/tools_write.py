"""The presentations server's writing tools (registered on SERVER from server.py)."""

from __future__ import annotations

import io
from typing import Annotated, Any

from pydantic import Field, ValidationError

from mcp_servers._core.errors import ToolError
from mcp_servers._office.package import require_suffix, save_package
from mcp_servers.presentations.editing import apply_operation
from mcp_servers.presentations.files import SHEET_SUFFIXES, DeckFiles
from mcp_servers.presentations.models import BulletItem, DeckMetadata, SlideOperation, SlideSpec, TableSpec
from mcp_servers.presentations.reading import find_picture, pictures
from mcp_servers.presentations.server import SERVER, FilePath, SlideIndex, slide_summary
from mcp_servers.presentations.slides import add_table, fill_slide, find_layout, get_slide, move_slide

Inches = Annotated[float | None, Field(ge=0, le=100, description="inches")]
Size = Annotated[float | None, Field(gt=0, le=100, description="inches")]


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
            "invalid_argument", "the shape would have no width or height at that position", argument="left"
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
) -> dict[str, Any]:
    """Create a .pptx deck (16:9) from slide specs.

    Each slide: {layout: title | title_and_content | section_header | two_content |
    title_only | blank, title, subtitle, bullets: [text | {text, level}], table: {rows,
    header}, columns: [[bullets], [bullets]] (two_content), notes}.

    Args:
        metadata: title, author, subject, keywords, comments, category.
        overwrite: replace an existing file of that name.
    """
    from pptx import Presentation

    if "/" in file_name or "\\" in file_name or not file_name.strip():
        raise ToolError(
            "invalid_argument", f"file_name: {file_name!r} must be a plain file name", argument="file_name"
        )
    require_suffix(file_name, (".pptx",), argument="file_name")
    folder = files.ctx.files.resolve(directory, argument="directory", kind="dir")
    target = f"{files.ctx.files.to_virtual(folder).rstrip('/')}/{file_name}"
    path, virtual = files.locate(target, argument="file_name", must_exist=False)
    if path.exists() and not overwrite:
        raise ToolError(
            "already_exists",
            f"file_name: {virtual} already exists (pass overwrite=true)",
            argument="file_name",
        )
    deck = Presentation()
    deck.slide_width, deck.slide_height = 12192000, 6858000  # 13.333 x 7.5 in (16:9)
    properties = deck.core_properties
    if files.ctx.user_name:
        properties.author = properties.last_modified_by = files.ctx.user_name
    for name, value in (metadata.model_dump(exclude_none=True) if metadata else {}).items():
        setattr(properties, name, value)
    for spec in slides:
        fill_slide(deck.slides.add_slide(find_layout(deck, spec.layout)), spec)
    size = save_package(deck, path)
    return {"file_path": virtual, "slide_count": len(slides), "bytes": size, "created": True}


@SERVER.tool(action="delete", destructive=True)
def delete_deck(files: DeckFiles, file_path: FilePath) -> dict[str, Any]:
    """Delete a .pptx file."""
    path, virtual = files.locate(file_path)
    path.unlink()
    return {"file_path": virtual, "deleted": True}


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
        Field(description="{title, subtitle, bullets, table, columns, notes} instead of flat arguments"),
    ] = None,
) -> dict[str, Any]:
    """Add a slide at a position, with a layout and content.

    Layouts: title, title_and_content, section_header, two_content, title_only, blank, or
    a layout name of the deck.
    """
    if index is not None and slide_index is not None and index != slide_index:
        raise ToolError("invalid_argument", "give index or slide_index, not both", argument="index")
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
                "invalid_argument", f"content: {', '.join(clash)} given twice", argument="content"
            )
        flat.update(content)
    try:
        spec = SlideSpec(layout=layout, **{name: value for name, value in flat.items() if value is not None})
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ToolError(
            "invalid_argument", f"content: {where}: {problem['msg']}", argument="content"
        ) from None
    with files.edit(file_path) as (deck, virtual):
        count = len(deck.slides)
        if index is not None and index > count:
            raise ToolError(
                "not_found",
                f"index: the deck has {count} slide(s); the new slide can go at 0..{count}",
                argument="index",
            )
        fill_slide(deck.slides.add_slide(find_layout(deck, layout)), spec)
        position = count if index is None else index
        if position != count:
            move_slide(deck, count, position)
        summary = slide_summary(deck, position)
    return {"file_path": virtual, "slide_count": count + 1, **summary}


@SERVER.tool(action="edit")
def edit_slides(
    files: DeckFiles,
    file_path: FilePath,
    operations: list[SlideOperation],
    metadata: DeckMetadata | None = None,
) -> dict[str, Any]:
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
    the previous operation.

    Args:
        metadata: core properties to update (title, author, subject, ...).
    """
    if not operations and metadata is None:
        raise ToolError("invalid_argument", "operations: give at least one operation", argument="operations")
    with files.edit(file_path) as (deck, virtual):
        results = [apply_operation(deck, operation, number) for number, operation in enumerate(operations)]
        for name, value in (metadata.model_dump(exclude_none=True) if metadata else {}).items():
            setattr(deck.core_properties, name, value)
        count = len(deck.slides)
    return {"file_path": virtual, "applied": results, "slide_count": count}


@SERVER.tool(action="add_image")
def add_image(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: SlideIndex,
    image_path: Annotated[str, Field(description="an image file in the root (.png, .jpg, .gif, .bmp, .tif)")],
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
) -> dict[str, Any]:
    """Place a picture on a slide.

    Position x, y (default 1.0, 1.5) and size in inches; with one of width/height the
    aspect ratio is kept, with neither the image's own size.
    """
    image = files.image(image_path)
    with files.edit(file_path) as (deck, virtual):
        slide = get_slide(deck, slide_index)
        try:
            picture = slide.shapes.add_picture(
                str(image),
                _emu(1.0 if x is None else x),
                _emu(1.5 if y is None else y),
                _emu(width),
                _emu(height),
            )
        except Exception as exc:
            raise ToolError(
                "unsupported",
                f"image_path: {image_path} is not a supported image file",
                argument="image_path",
            ) from exc
        annotation = next(
            name for name, shape in pictures(slide, slide_index) if shape.shape_id == picture.shape_id
        )
    return {"file_path": virtual, "slide_index": slide_index, "annotation": annotation, "name": picture.name}


@SERVER.tool(action="modify_image")
def modify_image(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: Annotated[int | None, Field(ge=0, description="the slide (with image_index)")] = None,
    image_index: Annotated[int | None, Field(ge=0, description="0-based picture index on the slide")] = None,
    operation: Annotated[
        str | None, Field(description="rotate | flip | brightness | contrast | crop (pixel edits)")
    ] = None,
    rotation: Annotated[int | None, Field(ge=-360, le=360, description="degrees clockwise")] = None,
    flip: Annotated[str | None, Field(description="horizontal | vertical")] = None,
    brightness: Annotated[float | None, Field(ge=0, le=10, description="factor, 1.0 = unchanged")] = None,
    contrast: Annotated[float | None, Field(ge=0, le=10, description="factor, 1.0 = unchanged")] = None,
    crop_left: Annotated[int | None, Field(ge=0)] = None,
    crop_top: Annotated[int | None, Field(ge=0)] = None,
    crop_right: Annotated[int | None, Field(ge=0)] = None,
    crop_bottom: Annotated[int | None, Field(ge=0)] = None,
    annotation: Annotated[
        str | None, Field(description="slide.<i>.image.<k> (instead of slide_index + image_index)")
    ] = None,
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    image_path: Annotated[str | None, Field(description="replace the picture with this image file")] = None,
    delete: bool = False,
) -> dict[str, Any]:
    """Edit a picture: pixel operations, move, resize, replace or delete.

    Pixel operations: rotate, flip, brightness, contrast, crop (in pixels; stored as a new
    image). Move with x, y; resize with width/height (one dimension keeps the aspect
    ratio); replace with another image file; or delete it.
    """
    from mcp_servers._office.pixels import PixelEdit, apply

    if annotation is None:
        if slide_index is None or image_index is None:
            raise ToolError(
                "invalid_argument", "give slide_index and image_index, or annotation", argument="image_index"
            )
        annotation = f"slide.{slide_index}.image.{image_index}"
    replacement = files.image(image_path) if image_path is not None else None
    if (
        operation is None
        and replacement is None
        and not delete
        and all(v is None for v in (x, y, width, height))
    ):
        raise ToolError(
            "invalid_argument", "nothing to change: give operation, x, y, width, height, image_path or delete"
        )
    with files.edit(file_path) as (deck, virtual):
        found_slide, name, shape = find_picture(deck, annotation)
        if delete:
            shape._element.getparent().remove(shape._element)
            return_value = {"file_path": virtual, "annotation": name, "deleted": True}
        else:
            slide = deck.slides[found_slide]
            if replacement is not None:
                _point_at(slide, shape, str(replacement), image_path)
            if operation is not None:
                edit = PixelEdit(
                    operation,
                    rotation,
                    flip,
                    brightness,
                    contrast,
                    crop_left,
                    crop_top,
                    crop_right,
                    crop_bottom,
                )
                data, _extension, (px_width, px_height) = apply(shape.image.blob, edit)
                _point_at(slide, shape, io.BytesIO(data), "the edited picture")
                if px_width and shape.width:
                    shape.height = int(shape.width * px_height / px_width)
            if width is not None and height is None and shape.width:
                shape.height = int(shape.height * _emu(width) / shape.width)
            if height is not None and width is None and shape.height:
                shape.width = int(shape.width * _emu(height) / shape.height)
            for attribute, value in (("left", x), ("top", y), ("width", width), ("height", height)):
                if value is not None:
                    setattr(shape, attribute, _emu(value))
            return_value = {
                "file_path": virtual,
                "annotation": name,
                "x": round(shape.left / 914400, 2),
                "y": round(shape.top / 914400, 2),
                "width": round(shape.width / 914400, 2),
                "height": round(shape.height / 914400, 2),
            }
    return return_value


def _point_at(slide: Any, shape: Any, image: Any, shown: str) -> None:
    """Make a picture show another image (a new or shared image part of the slide)."""
    try:
        _part, rel_id = slide.part.get_or_add_image_part(image)
    except Exception as exc:
        raise ToolError(
            "unsupported", f"image_path: {shown} is not a supported image file", argument="image_path"
        ) from exc
    shape._element.blipFill.blip.rEmbed = rel_id


@SERVER.tool(action="insert_chart")
def insert_chart(
    files: DeckFiles,
    presentation_path: FilePath,
    slide_index: SlideIndex,
    spreadsheet_path: Annotated[str, Field(description="the .xlsx holding the data, e.g. /Data/sales.xlsx")],
    sheet_name: str,
    data_range: Annotated[
        str, Field(description="e.g. A1:C6: first row = series names, first column = categories")
    ],
    chart_type: Annotated[
        str,
        Field(
            description="bar, column, stacked_bar, stacked_column, line, pie, doughnut, area, scatter, radar"
        ),
    ] = "bar",
    title: str | None = None,
    position: Annotated[str, Field(description="body | left | right (area under the title)")] = "body",
    include_header: Annotated[bool, Field(description="the first row holds series names")] = True,
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    legend: bool = True,
) -> dict[str, Any]:
    """Insert a native chart built from a range of a workbook in the root.

    Formula cells give their cached values. The chart embeds its data, so it stays
    editable in PowerPoint. x, y, width, height (inches) override position.
    """
    from mcp_servers.presentations.charts import CHART_TYPES, add_chart, chart_data, read_range

    if chart_type not in CHART_TYPES:
        raise ToolError(
            "invalid_argument",
            f"chart_type: expected one of {', '.join(CHART_TYPES)}, got {chart_type!r}",
            argument="chart_type",
        )
    if position not in ("body", "left", "right"):
        raise ToolError(
            "invalid_argument",
            f"position: expected body, left or right, got {position!r}",
            argument="position",
        )
    sheet_path, sheet_virtual = files.existing(
        spreadsheet_path, "spreadsheet_path", SHEET_SUFFIXES, "a workbook"
    )
    rows = read_range(sheet_path, sheet_virtual, sheet_name, data_range, include_header=include_header)
    data = chart_data(rows, data_range, chart_type, include_header=include_header)
    with files.edit(presentation_path, argument="presentation_path") as (deck, virtual):
        slide = get_slide(deck, slide_index)
        left, top, full_width, full_height = _box(deck, None, None, None, None)
        if position != "body":
            full_width = (full_width - int(0.25 * 914400)) // 2
            if position == "right":
                left += full_width + int(0.25 * 914400)
        box = (
            _emu(x) if x is not None else left,
            _emu(y) if y is not None else top,
            _emu(width) if width is not None else full_width,
            _emu(height) if height is not None else full_height,
        )
        frame = add_chart(slide, data, chart_type, title, box, legend)
    body_rows = len(rows) - (1 if include_header else 0)
    return {
        "file_path": virtual,
        "slide_index": slide_index,
        "name": frame.name,
        "chart_type": chart_type,
        "categories": body_rows,
        "series": len(rows[0]) - 1,
    }


@SERVER.tool(action="insert_table")
def insert_table(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: SlideIndex,
    rows: list[list[Any]],
    header: bool = True,
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    font_size: Annotated[float | None, Field(gt=0, le=100, description="points (default 14)")] = None,
) -> dict[str, Any]:
    """Insert a table on a slide (first row a bold header by default).

    x, y, width, height in inches (default: under the title, full width, 0.4 in per row).
    """
    spec = TableSpec(rows=rows, header=header, font_size=font_size)
    with files.edit(file_path) as (deck, virtual):
        slide = get_slide(deck, slide_index)
        shape = add_table(slide, spec, left=x, top=y, width=width, height=height)
    return {
        "file_path": virtual,
        "slide_index": slide_index,
        "name": shape.name,
        "rows": len(rows),
        "cols": max(len(row) for row in rows),
    }


@SERVER.tool(action="add_shape")
def add_shape(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: SlideIndex,
    shape_type: Annotated[
        str,
        Field(
            description="rectangle, rounded_rectangle, oval, triangle, right_arrow, star, heart, cloud, ... or text_box"
        ),
    ] = "rectangle",
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    fill_color: Annotated[str | None, Field(description="hex like #1F4E79")] = None,
    line_color: str | None = None,
    line_width: Annotated[float | None, Field(ge=0, le=100, description="points")] = None,
    text: str | None = None,
    text_color: str | None = None,
    font_size: Annotated[float | None, Field(gt=0, le=400)] = None,
    bold: bool | None = None,
) -> dict[str, Any]:
    """Add an autoshape or text box with optional text, fill, outline and font settings.

    x, y default 1.0 and width, height default 2.0 (inches).
    """
    from mcp_servers.presentations.shapes import add_autoshape

    with files.edit(file_path) as (deck, virtual):
        slide = get_slide(deck, slide_index)
        shape = add_autoshape(
            slide,
            shape_type,
            _box(deck, 1.0 if x is None else x, 1.0 if y is None else y, width or 2.0, height or 2.0),
            text=text,
            fill_color=fill_color,
            line_color=line_color,
            line_width=line_width,
            font_size=font_size,
            font_color=text_color,
            bold=bold,
        )
    return {"file_path": virtual, "slide_index": slide_index, "name": shape.name, "shape_id": shape.shape_id}
