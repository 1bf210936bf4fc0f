"""The documents server's writing tools (registered on SERVER from server.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from mcp_servers._core.errors import ToolError
from mcp_servers.documents.blocks import build_blocks, place
from mcp_servers.documents.body import resolve
from mcp_servers.documents.editing import add_text, delete, edit_text
from mcp_servers.documents.editing import apply_formatting as format_target
from mcp_servers.documents.files import DocumentFiles
from mcp_servers.documents.models import Alignment, ContentBlock, DocumentMetadata
from mcp_servers.documents.office import require_suffix, save_package
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
    directory: Annotated[str, Field(description="folder for the new file, e.g. /Outputs (created if missing)")],
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
        raise ToolError("invalid_argument", f"file_name: {file_name!r} must be a plain file name", argument="file_name")
    require_suffix(file_name, (".docx",), argument="file_name")
    folder = files.ctx.files.resolve(directory, argument="directory", kind="dir")
    virtual_folder = files.ctx.files.to_virtual(folder)
    target = f"{virtual_folder.rstrip('/')}/{file_name}"
    path, virtual = files.locate(target, argument="file_name", must_exist=False)
    if path.exists() and not overwrite:
        raise ToolError("already_exists", f"file_name: {virtual} already exists (pass overwrite=true)", argument="file_name")
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
    position: Position = "after",
    style: Annotated[str | None, Field(description="paragraph style for new paragraphs, e.g. 'Heading 2'")] = None,
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
                "unsupported", "content: a section_break can only be added with identifier='body', position='end'"
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
def edit_content_text(files: DocumentFiles, file_path: FilePath, identifier: Identifier, new_text: str) -> dict[str, Any]:
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
    scope: Annotated[str, Field(description="element (remove it) | text (clear its text, keep it and its images)")] = "element",
) -> dict[str, Any]:
    """Delete a paragraph, run, table, table row, or clear the text of any element.

    Deleting shifts the indices of later siblings (body.p.5 becomes body.p.4): re-read
    before using further identifiers.

    Args:
        scope: element | text.
    """
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        done = delete(target, scope)
    return {"file_path": virtual, "identifier": target.identifier, "result": done}


@SERVER.tool(action="add_image")
def add_image(
    files: DocumentFiles,
    file_path: FilePath,
    image_path: Annotated[str, Field(description="an image file in the root (.png, .jpg, .gif, .bmp, .tif)")],
    identifier: Identifier = "body",
    position: Position = "end",
    width_inches: Inches = None,
    height_inches: Inches = None,
) -> dict[str, Any]:
    """Insert a picture in a new paragraph at an identifier (default: end of the body).

    With only one of width/height the aspect ratio is kept; with neither, the image's own size.

    Args:
        position: before | after | start | end.
    """
    block = ContentBlock(type="image", path=image_path, width_inches=width_inches, height_inches=height_inches)

    def image_argument(value: str, _where: str) -> Any:
        return files.image(value, "image_path")

    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        elements = build_blocks(document, [block], image_argument)
        place(elements, target, position)
        from mcp_servers.documents.reading import collect_images

        count = len(collect_images(document))
    return {"file_path": virtual, "identifier": target.identifier, "images_in_document": count}


@SERVER.tool(action="modify_image")
def modify_image(
    files: DocumentFiles,
    file_path: FilePath,
    annotation: Annotated[str, Field(description="image.N as shown in reads")],
    width_inches: Inches = None,
    height_inches: Inches = None,
    image_path: Annotated[str | None, Field(description="replace the picture with this image file")] = None,
    alt_text: str | None = None,
) -> dict[str, Any]:
    """Resize a picture, replace it with another image file, or set its alt text.

    Args:
        alt_text: the picture's description (alternative text).
    """
    from mcp_servers.documents.images import find_image, replace, resize, set_description

    if width_inches is None and height_inches is None and image_path is None and alt_text is None:
        raise ToolError("invalid_argument", "nothing to change: give width_inches, height_inches, image_path or alt_text")
    with files.edit(file_path) as (document, virtual):
        image = find_image(document, annotation)
        if image_path is not None:
            replace(document, image, files.image(image_path, "image_path"), image_path)
        if width_inches is not None or height_inches is not None:
            resize(image, width_inches, height_inches)
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
    highlight: Annotated[str | None, Field(description="yellow, bright_green, turquoise, ... or none")] = None,
    alignment: Alignment | None = None,
    style: Annotated[str | None, Field(description="paragraph style name, e.g. 'Heading 2'")] = None,
) -> dict[str, Any]:
    """Format a paragraph, run, table cell/row/table: character formatting goes to every run
    addressed; alignment and style to the paragraphs."""
    formatting = {
        "bold": bold, "italic": italic, "underline": underline, "strikethrough": strikethrough,
        "font_size": font_size, "font_color": font_color, "font_name": font_name, "highlight": highlight,
        "alignment": alignment, "style": style,
    }
    if all(value is None for value in formatting.values()):
        raise ToolError("invalid_argument", "nothing to apply: give at least one formatting argument")
    with files.edit(file_path) as (document, virtual):
        target = resolve(document, identifier)
        applied = format_target(document, target, formatting)
    return {"file_path": virtual, "identifier": target.identifier, "applied": applied}


@SERVER.tool(action="margins")
def page_margins(
    files: DocumentFiles,
    file_path: FilePath,
    section_index: Annotated[int | None, Field(ge=0, description="one section (default: all)")] = None,
    top: Inches = None,
    bottom: Inches = None,
    left: Inches = None,
    right: Inches = None,
) -> dict[str, Any]:
    """Read page margins (no margin given) or set them, in inches, for one or all sections."""
    from mcp_servers.documents.layout import page_setup, select_sections, set_margins

    margins = {"top": top, "bottom": bottom, "left": left, "right": right}
    if all(value is None for value in margins.values()):
        document, virtual = files.open(file_path)
        return {"file_path": virtual, "sections": [page_setup(i, s) for i, s in select_sections(document, section_index)]}
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
    orientation: Annotated[str | None, Field(description="portrait | landscape (omit to read)")] = None,
    section_index: Annotated[int | None, Field(ge=0, description="one section (default: all)")] = None,
) -> dict[str, Any]:
    """Read or set page orientation for one or all sections (width and height are swapped)."""
    from mcp_servers.documents.layout import apply_orientation, page_setup, select_sections

    if orientation is None:
        document, virtual = files.open(file_path)
        return {"file_path": virtual, "sections": [page_setup(i, s) for i, s in select_sections(document, section_index)]}
    with files.edit(file_path) as (document, virtual):
        chosen = select_sections(document, section_index)
        for _index, section in chosen:
            apply_orientation(section, orientation)
        result = [page_setup(i, s) for i, s in chosen]
    return {"file_path": virtual, "sections": result}
