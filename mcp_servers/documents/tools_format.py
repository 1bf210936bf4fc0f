"""The documents server's picture, formatting and page-setup tools (registered on SERVER)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from atoll.errors import ErrorCode
from atoll.formats.docx.reading import collect_images
from mcp_servers._core.errors import ToolError
from mcp_servers._office.pixels import CropEdge, Factor, FlipAxis, PixelEdit, PixelOperation, Rotation
from mcp_servers.documents.blocks import build_blocks, place
from mcp_servers.documents.body import resolve
from mcp_servers.documents.editing import apply_formatting as format_target
from mcp_servers.documents.files import DocumentFiles
from mcp_servers.documents.models import Alignment, ContentBlock
from mcp_servers.documents.results import FormattingApplied, ImageAdded, ImageInfo, PageLayout
from mcp_servers.documents.server import SERVER, FilePath, Identifier
from mcp_servers.documents.tools_write import Inches, Position


@SERVER.tool(action="add_image")
def add_image(
    files: DocumentFiles,
    file_path: FilePath,
    image_path: Annotated[str, Field(description="an image file in the root (.png, .jpg, .gif, .bmp, .tif)")],
    identifier: Identifier = "body",
    position: Position = "end",
    width: Inches = None,
    height: Inches = None,
) -> ImageAdded:
    """Insert a picture in a new paragraph at an identifier (default: end of the body).

    Width and height are in inches; with only one of them the aspect ratio is kept, with
    neither the image's own size.

    Args:
        position: before | after | start | end.
    """
    block = ContentBlock(type="image", path=image_path, width_inches=width, height_inches=height)

    def image_argument(value: str, _where: str) -> Any:
        return files.image(value, "image_path")

    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        if target.area != "body":
            raise ToolError(
                ErrorCode.unsupported,
                f"identifier: pictures cannot be added to the {target.area}",
                argument="identifier",
            )
        elements = build_blocks(document, [block], image_argument)
        place(elements, target, position)
        images = collect_images(document)
        new = next(
            (image for image in images if any(image.drawing in el.iter() for el in elements)), images[-1]
        )
        summary = new.summary()
    return ImageAdded.from_fields(
        {
            "file_path": virtual,
            "identifier": target.identifier,
            "images_in_document": len(images),
            **summary,
        }
    )


@SERVER.tool(action="modify_image")
def modify_image(
    files: DocumentFiles,
    file_path: FilePath,
    image_index: Annotated[int | None, Field(ge=0, description="0-based image index (image.N)")] = None,
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
        str | None, Field(description="image.N as shown in reads (instead of image_index)")
    ] = None,
    width: Inches = None,
    height: Inches = None,
    image_path: Annotated[str | None, Field(description="replace the picture with this image file")] = None,
    alt_text: str | None = None,
) -> ImageInfo:
    """Edit a picture: pixel operations, resize, replace, or alt text.

    Pixel operations: rotate, flip, brightness, contrast, crop (in pixels); resize in
    inches (one dimension keeps the aspect ratio); replace with another image file; set
    the alt text. The picture is chosen by image_index or annotation.

    Args:
        alt_text: the picture's description (alternative text).
    """
    from mcp_servers.documents.images import find_image, replace, replace_pixels, resize, set_description

    if image_index is None and annotation is None:
        raise ToolError(
            ErrorCode.invalid_argument, "image_index: give image_index or annotation", argument="image_index"
        )
    if operation is None and width is None and height is None and image_path is None and alt_text is None:
        raise ToolError(
            ErrorCode.invalid_argument,
            "nothing to change: give operation, width, height, image_path or alt_text",
        )
    key = annotation if annotation is not None else f"image.{image_index}"
    with files.edit(file_path) as (document, virtual):
        image = find_image(document, key)
        if image_path is not None:
            replace(document, image, files.image(image_path, "image_path"), image_path)
        if operation is not None:
            edit = PixelEdit(
                operation, rotation, flip, brightness, contrast, crop_left, crop_top, crop_right, crop_bottom
            )
            replace_pixels(document, image, edit)
        if width is not None or height is not None:
            resize(image, width, height)
        if alt_text is not None:
            set_description(image, alt_text)
        summary = find_image(document, image.annotation).summary()
    return ImageInfo.from_fields({"file_path": virtual, **summary})


@SERVER.tool(action="format")
def apply_formatting(
    files: DocumentFiles,
    file_path: FilePath,
    identifier: Identifier,
    bold: bool | None = None,
    italic: bool | None = None,
    underline: bool | None = None,
    strikethrough: bool | None = None,
    font_size: Annotated[float | None, Field(gt=0, le=400, description="points")] = None,
    font_color: Annotated[str | None, Field(description="hex like #1F4E79 or a basic colour name")] = None,
    font_name: str | None = None,
    highlight: Annotated[
        str | None, Field(description="yellow, bright_green, turquoise, ... or none")
    ] = None,
    alignment: Alignment | None = None,
    style: Annotated[str | None, Field(description="paragraph style name, e.g. 'Heading 2'")] = None,
) -> FormattingApplied:
    """Format a paragraph, run or table element.

    Character formatting goes to every run addressed; alignment and style to the paragraphs.
    """
    formatting = {
        "bold": bold,
        "italic": italic,
        "underline": underline,
        "strikethrough": strikethrough,
        "font_size": font_size,
        "font_color": font_color,
        "font_name": font_name,
        "highlight": highlight,
        "alignment": alignment,
        "style": style,
    }
    if all(value is None for value in formatting.values()):
        raise ToolError(ErrorCode.invalid_argument, "nothing to apply: give at least one formatting argument")
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        applied = format_target(document, target, formatting)
    return FormattingApplied(file_path=virtual, identifier=target.identifier, applied=applied)


def _page_setup(
    files: DocumentFiles,
    file_path: object,
    action: str | None,
    section_index: int | None,
    change: Callable[[Any], None] | None,
    needed: str,
) -> dict[str, Any]:
    """Read the page setup of the chosen sections, or first ``change`` each of them (not
    with action=read or without a change, which action=set refuses, naming ``needed``)."""
    from mcp_servers.documents.layout import page_setup, select_sections

    if action not in (None, "read", "set"):
        raise ToolError(
            ErrorCode.invalid_argument, f"action: expected 'read' or 'set', got {action!r}", argument="action"
        )
    if action == "set" and change is None:
        raise ToolError(ErrorCode.invalid_argument, f"action=set needs {needed}", argument="action")
    if action == "read" or change is None:
        document, virtual = files.open(file_path)
        return {
            "file_path": virtual,
            "sections": [page_setup(i, s) for i, s in select_sections(document, section_index)],
        }
    with files.edit(file_path) as (document, virtual):
        chosen = select_sections(document, section_index)
        for _index, section in chosen:
            change(section)
        result = [page_setup(i, s) for i, s in chosen]
    return {"file_path": virtual, "sections": result}


@SERVER.tool(action="margins")
def page_margins(
    files: DocumentFiles,
    file_path: FilePath,
    action: Annotated[
        str | None, Field(description="read | set (default: set when a margin is given)")
    ] = None,
    section_index: Annotated[int | None, Field(ge=0, description="one section (default: all)")] = None,
    top: Inches = None,
    bottom: Inches = None,
    left: Inches = None,
    right: Inches = None,
) -> PageLayout:
    """Read page margins (no margin given) or set them, in inches, for one or all sections."""
    from mcp_servers.documents.layout import set_margins

    margins = {"top": top, "bottom": bottom, "left": left, "right": right}
    change = None if all(value is None for value in margins.values()) else lambda s: set_margins(s, margins)
    return PageLayout.from_fields(
        _page_setup(files, file_path, action, section_index, change, "a margin (top, bottom, left, right)")
    )


@SERVER.tool(action="orientation")
def page_orientation(
    files: DocumentFiles,
    file_path: FilePath,
    action: Annotated[
        str | None, Field(description="read | set (default: set when orientation is given)")
    ] = None,
    orientation: Annotated[str | None, Field(description="portrait | landscape (omit to read)")] = None,
    section_index: Annotated[int | None, Field(ge=0, description="one section (default: all)")] = None,
) -> PageLayout:
    """Read or set page orientation for one or all sections (width and height are swapped)."""
    from mcp_servers.documents.layout import apply_orientation

    change = None if orientation is None else lambda s: apply_orientation(s, orientation)
    return PageLayout.from_fields(_page_setup(files, file_path, action, section_index, change, "orientation"))
