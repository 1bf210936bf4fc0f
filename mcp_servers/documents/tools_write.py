"""The documents server's writing tools (registered on SERVER from server.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from mcp_servers._core.errors import ToolError
from mcp_servers._office.package import require_suffix, save_package
from mcp_servers.documents.blocks import build_blocks, place
from mcp_servers.documents.body import resolve
from mcp_servers.documents.editing import add_text, delete, edit_text
from mcp_servers.documents.editing import apply_formatting as format_target
from mcp_servers.documents.files import DocumentFiles
from mcp_servers.documents.models import Alignment, ContentBlock, DocumentMetadata
from mcp_servers.documents.reading import collect_images
from mcp_servers.documents.server import SERVER, FilePath, Identifier

Position = Literal["before", "after", "start", "end"]
Inches = Annotated[float | None, Field(gt=0, le=50)]


def _write_metadata(document: Any, metadata: DocumentMetadata | None, default_author: str | None) -> None:
    properties = document.core_properties
    if default_author:
        properties.author = default_author
        properties.last_modified_by = default_author
    if metadata is None:
        return
    for name, value in metadata.model_dump(exclude_none=True).items():
        setattr(properties, name, value)


@SERVER.tool(action="create")
def create_document(
    files: DocumentFiles,
    directory: Annotated[
        str, Field(description="folder for the new file, e.g. /Outputs (created if missing)")
    ],
    file_name: Annotated[str, Field(description="name ending in .docx")],
    content: list[ContentBlock],
    metadata: DocumentMetadata | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Create a .docx from content blocks.

    Block types: paragraph {text | runs[{text,bold,italic,underline}], style, alignment,
    bold, italic}, heading {text, level 1-9 (0 = Title)}, bullet_list / numbered_list
    {items: [text | {text, level}]}, table {rows: [[...]], header: true}, page_break,
    section_break {orientation}, image {path, width_inches, height_inches}.

    Args:
        content: the blocks, in order.
        metadata: title, author, subject, keywords, comments, category.
        overwrite: replace an existing file of that name.
    """
    import docx

    if "/" in file_name or "\\" in file_name or not file_name.strip():
        raise ToolError(
            "invalid_argument", f"file_name: {file_name!r} must be a plain file name", argument="file_name"
        )
    require_suffix(file_name, (".docx",), argument="file_name")
    folder = files.ctx.files.resolve(directory, argument="directory", kind="dir")
    virtual_folder = files.ctx.files.to_virtual(folder)
    target = f"{virtual_folder.rstrip('/')}/{file_name}"
    path, virtual = files.locate(target, argument="file_name", must_exist=False)
    if path.exists() and not overwrite:
        raise ToolError(
            "already_exists",
            f"file_name: {virtual} already exists (pass overwrite=true)",
            argument="file_name",
        )
    document = docx.Document()
    _write_metadata(document, metadata, files.ctx.user_name)
    build_blocks(document, content, files.image)
    size = save_package(document, path)
    return {"file_path": virtual, "blocks": len(content), "bytes": size, "created": True}


@SERVER.tool(action="delete", destructive=True)
def delete_document(files: DocumentFiles, file_path: FilePath) -> dict[str, Any]:
    """Delete a .docx file.

    Args:
        file_path: the .docx file to delete.
    """
    path, virtual = files.locate(file_path)
    path.unlink()
    return {"file_path": virtual, "deleted": True}


@SERVER.tool(action="add_text")
def add_content_text(
    files: DocumentFiles,
    file_path: FilePath,
    identifier: Identifier,
    text: str,
    position: Position = "end",
    style: Annotated[
        str | None, Field(description="paragraph style for new paragraphs, e.g. 'Heading 2'")
    ] = None,
) -> dict[str, Any]:
    """Add text at an identifier: inside it (start/end) or as new paragraph(s) before/after it.

    On a paragraph, before/after inserts new paragraphs (one per line) styled like the
    anchor (Normal after a heading); start/end extends the paragraph keeping the
    neighbouring run's formatting. On a run, start/end extends it and before/after adds a
    run with its formatting. Use identifier "body" with position "end" to append to the
    document. For tables or headings use add_table / insert_content.

    Args:
        text: the text; with before/after each line becomes a paragraph.
        position: before | after | start | end.
    """
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        done = add_text(document, target, text, position, style)
    return {"file_path": virtual, "identifier": target.identifier, "result": done}


@SERVER.tool(action="insert_content")
def insert_content(
    files: DocumentFiles,
    file_path: FilePath,
    identifier: Identifier,
    content: list[ContentBlock],
    position: Position = "after",
) -> dict[str, Any]:
    """Insert content blocks (headings, paragraphs, lists, tables, page breaks, images) at an identifier.

    Blocks are those of create_document. before/after place them next to a paragraph or
    table; start/end place them inside a container (body, a table cell, a header).
    A section_break can only be appended at the end of the body.

    Args:
        content: the blocks, in order.
        position: before | after | start | end.
    """
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        breaks = any(block.type == "section_break" for block in content)
        if breaks and not (target.identifier == "body" and position == "end"):
            raise ToolError(
                "unsupported",
                "content: a section_break can only be added with identifier='body', position='end'",
            )
        if target.area != "body" and any(block.type in ("image", "page_break") for block in content):
            raise ToolError(
                "unsupported",
                f"content: images and page breaks cannot go into the {target.area}",
                argument="content",
            )
        elements = build_blocks(document, content, files.image)
        if not (target.identifier == "body" and position == "end"):
            place(elements, target, position)
    return {"file_path": virtual, "identifier": target.identifier, "inserted_elements": len(elements)}


@SERVER.tool(action="add_table")
def add_table(
    files: DocumentFiles,
    file_path: FilePath,
    rows: list[list[Any]],
    identifier: Identifier = "body",
    position: Position = "end",
    header: bool = True,
    style: str | None = None,
) -> dict[str, Any]:
    """Insert a table (first row bold as a header by default) at an identifier (default: end of body).

    Args:
        rows: the table rows, each a list of cell values.
        header: make the first row a bold, repeating header row.
        style: a table style of the document (default "Table Grid" when present).
    """
    block = ContentBlock(type="table", rows=rows, header=header, style=style)
    result = insert_content(files, file_path, identifier, [block], position)
    return {**result, "rows": len(rows), "cols": max((len(r) for r in rows), default=0)}


@SERVER.tool(action="edit_text")
def edit_content_text(
    files: DocumentFiles, file_path: FilePath, identifier: Identifier, new_text: str
) -> dict[str, Any]:
    """Replace the text of a paragraph, run or table cell, keeping run formatting and inline images.

    Only the characters that differ are changed: untouched words keep their runs (bold,
    fonts, links), new text takes the formatting of the text before it, and images stay.
    A cell's lines map to its paragraphs.

    Args:
        new_text: the complete new text of the element.
    """
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        done = edit_text(target, new_text)
    return {"file_path": virtual, "identifier": target.identifier, "result": done}


@SERVER.tool(action="delete_text", destructive=True)
def delete_content_text(
    files: DocumentFiles,
    file_path: FilePath,
    identifier: Identifier,
    scope: Annotated[
        str,
        Field(description="content (clear the text, keep the element and its images) | element (remove it)"),
    ] = "content",
    collapse_whitespace: bool = False,
) -> dict[str, Any]:
    """Clear the text of any element, or delete a paragraph, run, table or table row.

    Deleting an element shifts the indices of later siblings (body.p.5 becomes body.p.4):
    re-read before using further identifiers.

    Args:
        scope: content | element.
        collapse_whitespace: after deleting a run, collapse the double spaces left in its paragraph.
    """
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        done = delete(target, scope, collapse_whitespace)
    return {"file_path": virtual, "identifier": target.identifier, "result": done}


@SERVER.tool(action="add_image")
def add_image(
    files: DocumentFiles,
    file_path: FilePath,
    image_path: Annotated[str, Field(description="an image file in the root (.png, .jpg, .gif, .bmp, .tif)")],
    identifier: Identifier = "body",
    position: Position = "end",
    width: Inches = None,
    height: Inches = None,
) -> dict[str, Any]:
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
                "unsupported",
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
    return {
        "file_path": virtual,
        "identifier": target.identifier,
        "images_in_document": len(images),
        **summary,
    }


@SERVER.tool(action="modify_image")
def modify_image(
    files: DocumentFiles,
    file_path: FilePath,
    image_index: Annotated[int | None, Field(ge=0, description="0-based image index (image.N)")] = None,
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
        str | None, Field(description="image.N as shown in reads (instead of image_index)")
    ] = None,
    width: Inches = None,
    height: Inches = None,
    image_path: Annotated[str | None, Field(description="replace the picture with this image file")] = None,
    alt_text: str | None = None,
) -> dict[str, Any]:
    """Edit a picture: pixel operations, resize, replace, or alt text.

    Pixel operations: rotate, flip, brightness, contrast, crop (in pixels); resize in
    inches (one dimension keeps the aspect ratio); replace with another image file; set
    the alt text. The picture is chosen by image_index or annotation.

    Args:
        alt_text: the picture's description (alternative text).
    """
    from mcp_servers._office.pixels import PixelEdit
    from mcp_servers.documents.images import find_image, replace, replace_pixels, resize, set_description

    if image_index is None and annotation is None:
        raise ToolError(
            "invalid_argument", "image_index: give image_index or annotation", argument="image_index"
        )
    if operation is None and width is None and height is None and image_path is None and alt_text is None:
        raise ToolError(
            "invalid_argument", "nothing to change: give operation, width, height, image_path or alt_text"
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
    return {"file_path": virtual, **summary}


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
) -> dict[str, Any]:
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
        raise ToolError("invalid_argument", "nothing to apply: give at least one formatting argument")
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        applied = format_target(document, target, formatting)
    return {"file_path": virtual, "identifier": target.identifier, "applied": applied}


def _check_action(action: str | None, nothing_given: bool, needed: str) -> None:
    if action not in (None, "read", "set"):
        raise ToolError(
            "invalid_argument", f"action: expected 'read' or 'set', got {action!r}", argument="action"
        )
    if action == "set" and nothing_given:
        raise ToolError("invalid_argument", f"action=set needs {needed}", argument="action")


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
) -> dict[str, Any]:
    """Read page margins (no margin given) or set them, in inches, for one or all sections."""
    from mcp_servers.documents.layout import page_setup, select_sections, set_margins

    margins = {"top": top, "bottom": bottom, "left": left, "right": right}
    _check_action(
        action, all(value is None for value in margins.values()), "a margin (top, bottom, left, right)"
    )
    if action == "read" or all(value is None for value in margins.values()):
        document, virtual = files.open(file_path)
        return {
            "file_path": virtual,
            "sections": [page_setup(i, s) for i, s in select_sections(document, section_index)],
        }
    with files.edit(file_path) as (document, virtual):
        chosen = select_sections(document, section_index)
        for _index, section in chosen:
            set_margins(section, margins)
        result = [page_setup(i, s) for i, s in chosen]
    return {"file_path": virtual, "sections": result}


@SERVER.tool(action="orientation")
def page_orientation(
    files: DocumentFiles,
    file_path: FilePath,
    action: Annotated[
        str | None, Field(description="read | set (default: set when orientation is given)")
    ] = None,
    orientation: Annotated[str | None, Field(description="portrait | landscape (omit to read)")] = None,
    section_index: Annotated[int | None, Field(ge=0, description="one section (default: all)")] = None,
) -> dict[str, Any]:
    """Read or set page orientation for one or all sections (width and height are swapped)."""
    from mcp_servers.documents.layout import apply_orientation, page_setup, select_sections

    _check_action(action, orientation is None, "orientation")
    if action == "read" or orientation is None:
        document, virtual = files.open(file_path)
        return {
            "file_path": virtual,
            "sections": [page_setup(i, s) for i, s in select_sections(document, section_index)],
        }
    with files.edit(file_path) as (document, virtual):
        chosen = select_sections(document, section_index)
        for _index, section in chosen:
            apply_orientation(section, orientation)
        result = [page_setup(i, s) for i, s in chosen]
    return {"file_path": virtual, "sections": result}
