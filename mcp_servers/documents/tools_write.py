"""The documents server's writing tools (registered on SERVER from server.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from atoll.errors import ErrorCode
from mcp_servers._core.definition import TableCell
from mcp_servers._core.errors import ToolError
from mcp_servers._office.package import save_package
from mcp_servers._office.properties import write_core_properties
from mcp_servers.documents.blocks import build_blocks, place
from mcp_servers.documents.body import resolve
from mcp_servers.documents.editing import add_text, delete, edit_text
from mcp_servers.documents.files import DocumentFiles
from mcp_servers.documents.models import ContentBlock, DocumentMetadata
from mcp_servers.documents.results import (
    ContentInserted,
    DocumentCreated,
    DocumentDeleted,
    TableAdded,
    TextChanged,
)
from mcp_servers.documents.server import SERVER, FilePath, Identifier

Position = Literal["before", "after", "start", "end"]
Inches = Annotated[float | None, Field(gt=0, le=50)]


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
) -> DocumentCreated:
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

    path, virtual = files.new_file(directory, file_name, overwrite=overwrite)
    document = docx.Document()
    write_core_properties(document, metadata, files.ctx.user_name)
    build_blocks(document, content, files.image)
    size = save_package(document, path)
    return DocumentCreated(file_path=virtual, blocks=len(content), bytes=size, created=True)


@SERVER.tool(action="delete", destructive=True)
def delete_document(files: DocumentFiles, file_path: FilePath) -> DocumentDeleted:
    """Delete a .docx file.

    Args:
        file_path: the .docx file to delete.
    """
    path, virtual = files.locate(file_path)
    path.unlink()
    return DocumentDeleted(file_path=virtual, deleted=True)


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
) -> TextChanged:
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
    return TextChanged(file_path=virtual, identifier=target.identifier, result=done)


@SERVER.tool(action="insert_content")
def insert_content(
    files: DocumentFiles,
    file_path: FilePath,
    identifier: Identifier,
    content: list[ContentBlock],
    position: Position = "after",
) -> ContentInserted:
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
                ErrorCode.unsupported,
                "content: a section_break can only be added with identifier='body', position='end'",
            )
        if target.area != "body" and any(block.type in ("image", "page_break") for block in content):
            raise ToolError(
                ErrorCode.unsupported,
                f"content: images and page breaks cannot go into the {target.area}",
                argument="content",
            )
        elements = build_blocks(document, content, files.image)
        if not (target.identifier == "body" and position == "end"):
            place(elements, target, position)
    return ContentInserted(file_path=virtual, identifier=target.identifier, inserted_elements=len(elements))


@SERVER.tool(action="add_table")
def add_table(
    files: DocumentFiles,
    file_path: FilePath,
    rows: list[list[TableCell]],
    identifier: Identifier = "body",
    position: Position = "end",
    header: bool = True,
    style: str | None = None,
) -> TableAdded:
    """Insert a table (first row bold as a header by default) at an identifier (default: end of body).

    Args:
        rows: the table rows, each a list of cell values.
        header: make the first row a bold, repeating header row.
        style: a table style of the document (default "Table Grid" when present).
    """
    block = ContentBlock(type="table", rows=rows, header=header, style=style)
    inserted = insert_content(files, file_path, identifier, [block], position)
    return TableAdded(
        file_path=inserted.file_path,
        identifier=inserted.identifier,
        inserted_elements=inserted.inserted_elements,
        rows=len(rows),
        cols=max((len(r) for r in rows), default=0),
    )


@SERVER.tool(action="edit_text")
def edit_content_text(
    files: DocumentFiles, file_path: FilePath, identifier: Identifier, new_text: str
) -> TextChanged:
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
    return TextChanged(file_path=virtual, identifier=target.identifier, result=done)


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
) -> TextChanged:
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
    return TextChanged(file_path=virtual, identifier=target.identifier, result=done)
