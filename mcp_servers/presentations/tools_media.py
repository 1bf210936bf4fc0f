"""The presentations server's picture, chart, table and shape tools (registered on SERVER)."""

from __future__ import annotations

import io
from typing import Annotated, Any

from pydantic import Field

from atoll.errors import ErrorCode
from atoll.formats.pptx import pictures
from mcp_servers._core.definition import TableCell
from mcp_servers._core.errors import ToolError
from mcp_servers._office.pixels import CropEdge, Factor, FlipAxis, PixelEdit, PixelOperation, Rotation, apply
from mcp_servers.presentations.files import SHEET_SUFFIXES, DeckFiles
from mcp_servers.presentations.models import TableSpec
from mcp_servers.presentations.pictures import find_picture
from mcp_servers.presentations.results import (
    ChartInserted,
    ImageChanged,
    ImagePlaced,
    ShapeAdded,
    TableInserted,
)
from mcp_servers.presentations.server import SERVER, FilePath, SlideIndex
from mcp_servers.presentations.slides import add_table, get_slide
from mcp_servers.presentations.tools_write import Inches, Size, _box, _emu


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
) -> ImagePlaced:
    """Place a picture on a slide.

    Position x, y (default 1.0, 1.5) and size in inches; with one of width/height the
    aspect ratio is kept, with neither the image's own size.
    """
    image = files.image(image_path)
    with files.edit(file_path) as (deck, virtual):
        slide = get_slide(deck, slide_index)
        try:
            picture = slide.shapes.add_picture(
                image,
                _emu(1.0 if x is None else x),
                _emu(1.5 if y is None else y),
                _emu(width),
                _emu(height),
            )
        except Exception as exc:
            raise ToolError(
                ErrorCode.unsupported,
                f"image_path: {image_path} is not a supported image file",
                argument="image_path",
            ) from exc
        annotation = next(
            name for name, shape in pictures(slide, slide_index) if shape.shape_id == picture.shape_id
        )
    return ImagePlaced(file_path=virtual, slide_index=slide_index, annotation=annotation, name=picture.name)


@SERVER.tool(action="modify_image")
def modify_image(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: Annotated[int | None, Field(ge=0, description="the slide (with image_index)")] = None,
    image_index: Annotated[int | None, Field(ge=0, description="0-based picture index on the slide")] = None,
    operation: PixelOperation = None,
    rotation: Rotation = None,
    flip: FlipAxis = None,
    brightness: Factor = None,
    contrast: Factor = None,
    crop_left: CropEdge = None,
    crop_top: CropEdge = None,
    crop_right: CropEdge = None,
    crop_bottom: CropEdge = None,
    annotation: Annotated[
        str | None, Field(description="slide.<i>.image.<k> (instead of slide_index + image_index)")
    ] = None,
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    image_path: Annotated[str | None, Field(description="replace the picture with this image file")] = None,
    delete: bool = False,
) -> ImageChanged:
    """Edit a picture: pixel operations, move, resize, replace or delete.

    Pixel operations: rotate, flip, brightness, contrast, crop (in pixels; stored as a new
    image). Move with x, y; resize with width/height (one dimension keeps the aspect
    ratio); replace with another image file; or delete it.
    """
    if annotation is None:
        if slide_index is None or image_index is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                "give slide_index and image_index, or annotation",
                argument="image_index",
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
            ErrorCode.invalid_argument,
            "nothing to change: give operation, x, y, width, height, image_path or delete",
        )
    with files.edit(file_path) as (deck, virtual):
        found_slide, name, shape = find_picture(deck, annotation)
        if delete:
            shape._element.getparent().remove(shape._element)
            return_value = {"file_path": virtual, "annotation": name, "deleted": True}
        else:
            slide = deck.slides[found_slide]
            if replacement is not None and image_path is not None:
                _point_at(slide, shape, replacement, image_path)
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
    return ImageChanged.from_fields(return_value)


def _point_at(slide: Any, shape: Any, image: Any, shown: str) -> None:
    """Make a picture show another image (a new or shared image part of the slide)."""
    try:
        _part, rel_id = slide.part.get_or_add_image_part(image)
    except Exception as exc:
        raise ToolError(
            ErrorCode.unsupported, f"image_path: {shown} is not a supported image file", argument="image_path"
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
) -> ChartInserted:
    """Insert a native chart built from a range of a workbook in the root.

    Formula cells give their cached values. The chart embeds its data, so it stays
    editable in PowerPoint. x, y, width, height (inches) override position.
    """
    from mcp_servers.presentations.charts import add_chart, chart_data, check_chart_type, read_range

    check_chart_type(chart_type)
    if position not in ("body", "left", "right"):
        raise ToolError(
            ErrorCode.invalid_argument,
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
    return ChartInserted(
        file_path=virtual,
        slide_index=slide_index,
        name=frame.name,
        chart_type=chart_type,
        categories=body_rows,
        series=len(rows[0]) - 1,
    )


@SERVER.tool(action="insert_table")
def insert_table(
    files: DeckFiles,
    file_path: FilePath,
    slide_index: SlideIndex,
    rows: list[list[TableCell]],
    header: bool = True,
    x: Inches = None,
    y: Inches = None,
    width: Size = None,
    height: Size = None,
    font_size: Annotated[float | None, Field(gt=0, le=100, description="points (default 14)")] = None,
) -> TableInserted:
    """Insert a table on a slide (first row a bold header by default).

    x, y, width, height in inches (default: under the title, full width, 0.4 in per row).
    """
    spec = TableSpec(rows=rows, header=header, font_size=font_size)
    with files.edit(file_path) as (deck, virtual):
        slide = get_slide(deck, slide_index)
        shape = add_table(slide, spec, left=x, top=y, width=width, height=height)
    return TableInserted(
        file_path=virtual,
        slide_index=slide_index,
        name=shape.name,
        rows=len(rows),
        cols=max(len(row) for row in rows),
    )


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
) -> ShapeAdded:
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
    return ShapeAdded(file_path=virtual, slide_index=slide_index, name=shape.name, shape_id=shape.shape_id)
