"""The documents server definition and its reading tools (writing tools: tools_write.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from atoll.errors import ErrorCode
from atoll.formats.docx.comments import read_comments
from atoll.formats.docx.reading import collect_images, read_blocks, render_block
from mcp_servers._core.definition import ServerDefinition
from mcp_servers._core.errors import ToolError
from mcp_servers._core.results import ImageBlock, ToolOutput
from mcp_servers.documents.files import DocumentFiles
from mcp_servers.documents.layout import page_setup, read_header_footer
from mcp_servers.documents.models import ContentBlock
from mcp_servers.documents.results import Comments, DocumentContent, DocumentOverview, HeaderFooter, ImageRead

SERVER = ServerDefinition(
    "documents",
    consolidated_name="docs",
    description=(
        "Word documents (.docx) under the filesystem root: create, read in document order "
        "(paragraphs and tables interleaved, tracked changes and comments shown), edit text "
        "by stable identifiers (body.p.3, body.p.3.r.0, body.tbl.0.r.1.c.2, header.s.0.p.0) "
        "keeping formatting and images, insert paragraphs and tables, format, images, page setup."
    ),
    state=DocumentFiles,
)

FilePath = Annotated[str, Field(description="the .docx file, e.g. /Reports/memo.docx")]
Identifier = Annotated[
    str,
    Field(
        description=(
            "element identifier as shown by read_document_content: body, body.p.<i>, body.p.<i>.r.<j>, "
            "body.tbl.<t>, body.tbl.<t>.r.<row>, body.tbl.<t>.r.<row>.c.<col>[.p.<k>[.r.<j>]], "
            "header.s.<section>[.p.<i>], footer.s.<section>[.p.<i>]"
        )
    ),
]

#: Blocks per page_index of read_document_content (the reference pages by 50 paragraphs).
PAGE_BLOCKS = 50


def total_pages(blocks: int) -> int:
    return max(1, -(-blocks // PAGE_BLOCKS))


IDENTIFIER_HELP = (
    "Identifiers: body.p.<i> = i-th body paragraph, .r.<j> = its j-th run, body.tbl.<t>.r.<row>.c.<col> = a table "
    "cell (then .p.<k>), header.s.<sec>/footer.s.<sec> = a section's header/footer."
)


@SERVER.tool(action="overview", read_only=True)
def get_document_overview(files: DocumentFiles, file_path: FilePath) -> ToolOutput[DocumentOverview]:
    """Outline of a document: headings with identifiers, counts, properties, page setup.

    Args:
        file_path: the .docx file.
    """
    document, virtual = files.open(file_path)
    blocks = read_blocks(document, name=virtual)
    headings = [
        {"id": b["id"], "level": b.get("level"), "text": b["text"]} for b in blocks if b["type"] == "heading"
    ]
    properties = document.core_properties
    data: dict[str, Any] = {
        "file_path": virtual,
        "title": properties.title or "",
        "author": properties.author or "",
        "paragraphs": sum(1 for b in blocks if b["type"] != "table"),
        "tables": sum(1 for b in blocks if b["type"] == "table"),
        "images": len(collect_images(document)),
        "comments": len(read_comments(document)),
        "tracked_changes": sum(len(b.get("tracked_changes", [])) for b in blocks),
        "total_pages": total_pages(len(blocks)),
        "printed_pages": (blocks[-1]["printed_page"] + 1) if blocks else 1,
        "words": sum(len(b["text"].split()) for b in blocks if b["type"] != "table"),
        "headings": headings,
        "sections": [page_setup(i, s) for i, s in enumerate(document.sections)],
    }
    lines = [
        f"{virtual}: {data['paragraphs']} paragraphs, {data['tables']} tables, {data['images']} images, "
        f"{data['comments']} comments, {data['tracked_changes']} tracked changes, {len(data['sections'])} section(s); "
        f"total_pages={data['total_pages']} (read_document_content page_index 0..{data['total_pages'] - 1}, "
        f"{PAGE_BLOCKS} blocks each); ~{data['printed_pages']} printed page(s) by explicit breaks",
    ]
    if data["title"]:
        lines.append(f"Title: {data['title']}")
    lines.append("Outline:" if headings else "Outline: (no headings)")
    lines.extend(f"  {'  ' * max(0, (h['level'] or 1) - 1)}[{h['id']}] {h['text']}" for h in headings)
    return ToolOutput(DocumentOverview.from_fields(data), text="\n".join(lines))


@SERVER.tool(action="read_content", read_only=True)
def read_document_content(
    files: DocumentFiles,
    file_path: FilePath,
    page_index: Annotated[int | None, Field(ge=0)] = None,
    section_index: Annotated[int | None, Field(ge=0)] = None,
    start_block: Annotated[int, Field(ge=0)] = 0,
    max_chars: Annotated[int, Field(ge=500, le=200_000)] = 30_000,
    include_runs: bool = False,
) -> ToolOutput[DocumentContent]:
    """Read a document in order (paragraphs and tables interleaved), each block labelled with its identifier.

    Tracked changes show as {++inserted++} / {--deleted--}; images as [image.N]; explicit
    page breaks as a "--- page break ---" line. For long documents read by page_index
    (page 0 = blocks 0-49, 1 = blocks 50-99, ...; get_document_overview gives total_pages).
    Output is also capped at max_chars; when truncated, continue with start_block =
    next_start_block.

    Args:
        file_path: the .docx file.
        page_index: only this page of 50 blocks (0-based); omit for the whole document.
        section_index: only this section (0-based; sections end at section breaks).
        start_block: index of the first block to return within the selection (for continuing a truncated read).
        max_chars: cap on the returned text.
        include_runs: also list each paragraph's runs with their identifiers and formatting.
    """
    document, virtual = files.open(file_path)
    blocks = read_blocks(document, include_runs=include_runs, name=virtual)
    sections = len(document.sections)
    if section_index is not None:
        if section_index >= sections:
            raise ToolError(
                ErrorCode.not_found,
                f"section_index: the document has {sections} section(s), no index {section_index}",
                argument="section_index",
            )
        blocks = [b for b in blocks if b["section"] == section_index]
    pages = total_pages(len(blocks))
    if page_index is not None:
        if page_index >= pages:
            raise ToolError(
                ErrorCode.not_found,
                f"page_index: the document has {pages} page(s) of {PAGE_BLOCKS} blocks, no index {page_index}",
                argument="page_index",
            )
        blocks = blocks[page_index * PAGE_BLOCKS : (page_index + 1) * PAGE_BLOCKS]
    total = len(blocks)
    shown: list[dict[str, Any]] = []
    rendered: list[str] = []
    used = 0
    previous_page = blocks[start_block - 1]["printed_page"] if 0 < start_block <= total else None
    for block in blocks[start_block:]:
        text = render_block(block)
        if include_runs and block.get("runs"):
            text += "\n" + "\n".join(f"    [{r['id']}] {r['text']!r}" for r in block["runs"])
        if previous_page is not None and block["printed_page"] != previous_page:
            text = "--- page break ---\n" + text
        if shown and used + len(text) > max_chars:
            break
        if len(text) > max_chars:
            text = text[:max_chars] + " …[block truncated]"
        shown.append(block)
        rendered.append(text)
        used += len(text) + 1
        previous_page = block["printed_page"]
    next_start = start_block + len(shown)
    truncated = next_start < total
    header = f"{virtual} — blocks {start_block}-{max(start_block, next_start - 1)} of {total}"
    if page_index is not None:
        header += f" on page {page_index} of {pages} (pages of {PAGE_BLOCKS} blocks)"
    else:
        header += f" ({pages} page(s) of {PAGE_BLOCKS} blocks)"
    if section_index is not None:
        header += f", section {section_index} of {sections}"
    footer = [f"…truncated: continue with start_block={next_start}"] if truncated else []
    data = {
        "file_path": virtual,
        "total_pages": pages,
        "page_index": page_index,
        "sections": sections,
        "section_index": section_index,
        "total_blocks": total,
        "start_block": start_block,
        "blocks": shown,
        "truncated": truncated,
        "next_start_block": next_start if truncated else None,
    }
    return ToolOutput(
        DocumentContent.from_fields(data), text="\n".join([header, IDENTIFIER_HELP, *rendered, *footer])
    )


@SERVER.tool(action="read_image", read_only=True)
def read_image(
    files: DocumentFiles,
    file_path: FilePath,
    annotation: Annotated[
        str, Field(description="image.N as shown in reads (or the run identifier holding it)")
    ],
) -> ToolOutput[ImageRead]:
    """Return one embedded image of the document (as MCP image content) with its size.

    Args:
        file_path: the .docx file.
    """
    from mcp_servers.documents.images import find_image, image_bytes

    document, virtual = files.open(file_path)
    image = find_image(document, annotation)
    data, mime = image_bytes(document, image)
    summary = {"file_path": virtual, **image.summary(), "mime_type": mime, "bytes": len(data)}
    text = (
        f"{image.annotation} in {virtual} at {summary['run']}: {mime}, {summary['width_inches']}x"
        f"{summary['height_inches']} in"
    )
    return ToolOutput(ImageRead.from_fields(summary), text=text, images=[ImageBlock(data, mime)])


@SERVER.tool(action="header_footer")
def header_footer(
    files: DocumentFiles,
    file_path: FilePath,
    action: Annotated[str, Field(description="read | set | clear | link")] = "read",
    area: Annotated[str, Field(description="header | footer")] = "header",
    section_index: Annotated[
        int | None, Field(ge=0, description="section (all sections when reading and omitted)")
    ] = None,
    text: str | None = None,
    content: Annotated[
        list[ContentBlock] | None,
        Field(description="content blocks for set (paragraphs, headings, lists, tables)"),
    ] = None,
    link_to_previous: bool | None = None,
) -> HeaderFooter:
    """Read, set, clear or link the default header or footer of a section.

    set writes that section's own header/footer (unlinked from the previous section):
    either text (lines become paragraphs, the existing formatting is kept) or content
    blocks. link with link_to_previous=true makes the section reuse the previous one's.
    Edit single paragraphs with edit_content_text on header.s.<sec>.p.<i>.

    Args:
        file_path: the .docx file.
        text: the new text (set).
        link_to_previous: for action=link (default true).
    """
    from mcp_servers.documents.layout import link_header_footer, select_sections, write_header_footer

    if area not in ("header", "footer"):
        raise ToolError(
            ErrorCode.invalid_argument, f"area: expected 'header' or 'footer', got {area!r}", argument="area"
        )
    if action == "read":
        document, virtual = files.open(file_path)
        return HeaderFooter(
            file_path=virtual,
            sections=[read_header_footer(i, s, area) for i, s in select_sections(document, section_index)],
        )
    if action not in ("set", "clear", "link"):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"action: expected read, set, clear or link, got {action!r}",
            argument="action",
        )
    if action == "set" and text is None and not content:
        raise ToolError(
            ErrorCode.invalid_argument, "text or content: required for action=set", argument="text"
        )
    with files.edit(file_path) as (document, virtual):
        chosen = select_sections(document, section_index if section_index is not None else 0)
        for _index, section in chosen:
            if action == "link":
                link_header_footer(section, area, True if link_to_previous is None else link_to_previous)
            elif action == "set" and content:
                write_header_footer(section, area, "", document=document, blocks=content)
            else:
                write_header_footer(section, area, (text or "") if action == "set" else "")
        result = [read_header_footer(i, s, area) for i, s in chosen]
    return HeaderFooter(file_path=virtual, sections=result)


@SERVER.tool(action="comments")
def comments(
    files: DocumentFiles,
    file_path: FilePath,
    action: Annotated[str, Field(description="read | add | delete")] = "read",
    identifier: Identifier | None = None,
    text: str | None = None,
    author: str | None = None,
    comment_id: int | None = None,
) -> Comments:
    """Read, add or delete comments.

    read lists every comment with its author, date, text, the text it is anchored to and
    the anchoring paragraph's identifier. add anchors a comment on a paragraph, run or
    cell (identifier + text; author defaults to the world's user). delete removes one by
    comment_id.

    Args:
        file_path: the .docx file.
        text: the comment text (add).
        author: the comment author (add).
        comment_id: the comment to delete.
    """
    from mcp_servers.documents.body import resolve
    from mcp_servers.documents.comments import add_comment, delete_comment

    if action == "read":
        document, virtual = files.open(file_path)
        return Comments(file_path=virtual, comments=read_comments(document))
    if action == "add":
        if identifier is None or text is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                "identifier and text are required to add a comment",
                argument="identifier",
            )
        name = author or files.ctx.user_name or files.ctx.user_email or "atoll"
        initials = "".join(part[0] for part in name.split() if part)[:4] or None
        with files.edit(file_path) as (document, virtual):
            new_id = add_comment(resolve(document, identifier), text, name, initials, document)
        return Comments(file_path=virtual, comment_id=new_id, added=True)
    if action == "delete":
        if comment_id is None:
            raise ToolError(
                ErrorCode.invalid_argument, "comment_id: required to delete a comment", argument="comment_id"
            )
        with files.edit(file_path) as (document, virtual):
            delete_comment(document, comment_id)
        return Comments(file_path=virtual, comment_id=comment_id, deleted=True)
    raise ToolError(
        ErrorCode.invalid_argument, f"action: expected read, add or delete, got {action!r}", argument="action"
    )
