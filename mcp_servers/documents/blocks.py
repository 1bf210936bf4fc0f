"""Turning content blocks into document XML, at the end of the body or at an identifier.

Blocks are built with python-docx at the end of the body (so styles, numbering and
image relationships are handled by the library) and then moved where they belong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.docx.elements import W_P, W_TBL
from atoll.formats.docx.names import qn
from mcp_servers._core.errors import ToolError
from mcp_servers.documents.body import Target
from mcp_servers.documents.models import ContentBlock, ListItem

# python-docx is imported on the first call that needs it, not when the server is built.
_section = lazy_module("docx.enum.section")
_style = lazy_module("docx.enum.style")
_oxml = lazy_module("docx.oxml")
_shared = lazy_module("docx.shared")
_text = lazy_module("docx.enum.text")


ALIGNMENTS = ("left", "center", "right", "justify")


def alignment(name: str) -> Any:
    """python-docx's paragraph alignment for one of :data:`ALIGNMENTS` (``"center"`` -> CENTER)."""
    return getattr(_text.WD_ALIGN_PARAGRAPH, name.upper())


_SECT_PR = qn("w:sectPr")

ImageResolver = Callable[[str, str], BinaryIO]


def paragraph_style(document: Any, name: str, *, argument: str = "style") -> Any:
    """The paragraph style called ``name`` (by name or id), or ToolError listing some."""
    styles = document.styles
    for style in styles:
        if style.type == _style.WD_STYLE_TYPE.PARAGRAPH and name in (style.name, style.style_id):
            return style
    available = sorted(s.name for s in styles if s.type == _style.WD_STYLE_TYPE.PARAGRAPH and s.name)[:25]
    raise ToolError(
        ErrorCode.invalid_argument,
        f"{argument}: the document has no paragraph style {name!r}; some available: {', '.join(available)}",
        argument=argument,
    )


def _ensure_heading_style(document: Any, level: int) -> str:
    name = "Title" if level == 0 else f"Heading {level}"
    try:
        paragraph_style(document, name)
    except ToolError:
        # Documents made elsewhere may lack heading styles; make a plain bold one.
        style = document.styles.add_style(name, _style.WD_STYLE_TYPE.PARAGRAPH)
        style.base_style = None
        style.font.bold = True
        style.font.size = _shared.Pt(max(11, 26 - 2 * level) if level else 28)
    return name


def _has_style(document: Any, name: str) -> bool:
    try:
        paragraph_style(document, name)
        return True
    except ToolError:
        return False


def build_blocks(document: Any, blocks: list[ContentBlock], resolve_image: ImageResolver) -> list[Any]:
    """Append ``blocks`` at the end of the body; return the new body elements in order.

    Raises ToolError ``invalid_argument`` for a block missing what its type needs (it
    names the block index) or an unknown style.
    """
    body = document.element.body
    count_before = len(body)
    numbered_lists = 0
    for index, block in enumerate(blocks):
        where = f"content[{index}] ({block.type})"
        if block.type == "paragraph":
            if block.text is None and not block.runs:
                raise ToolError(
                    ErrorCode.invalid_argument, f"{where}: needs 'text' or 'runs'", argument="content"
                )
            paragraph = document.add_paragraph()
            if block.style:
                paragraph.style = paragraph_style(document, block.style, argument=f"{where}.style")
            for spec in block.runs or []:
                run = paragraph.add_run(spec.text)
                run.bold, run.italic, run.underline = spec.bold, spec.italic, spec.underline
            if block.text is not None:
                run = paragraph.add_run(block.text)
                run.bold, run.italic = block.bold, block.italic
            if block.alignment:
                paragraph.alignment = alignment(block.alignment)
        elif block.type == "heading":
            if block.text is None:
                raise ToolError(ErrorCode.invalid_argument, f"{where}: needs 'text'", argument="content")
            level = 1 if block.level is None else block.level
            paragraph = document.add_paragraph(block.text, style=_ensure_heading_style(document, level))
            if block.alignment:
                paragraph.alignment = alignment(block.alignment)
        elif block.type in ("bullet_list", "numbered_list"):
            if not block.items:
                raise ToolError(
                    ErrorCode.invalid_argument, f"{where}: needs a non-empty 'items' list", argument="content"
                )
            numbered = block.type == "numbered_list"
            paragraphs = _add_list(document, block.items, numbered)
            if numbered:
                if numbered_lists or _document_has_numbered_items(document, paragraphs):
                    _restart_numbering(document, paragraphs)
                numbered_lists += 1
        elif block.type == "table":
            if not block.rows or not any(block.rows):
                raise ToolError(
                    ErrorCode.invalid_argument, f"{where}: needs a non-empty 'rows' list", argument="content"
                )
            add_table(document, block.rows, header=block.header, style=block.style)
        elif block.type == "page_break":
            document.add_page_break()
        elif block.type == "section_break":
            section = document.add_section(_section.WD_SECTION.NEW_PAGE)
            if block.orientation:
                set_orientation(section, block.orientation)
        elif block.type == "image":
            if not block.path:
                raise ToolError(
                    ErrorCode.invalid_argument, f"{where}: needs 'path' (an image file)", argument="content"
                )
            image_path = resolve_image(block.path, f"{where}.path")
            paragraph = document.add_paragraph()
            add_picture(paragraph.add_run(), image_path, block.path, block.width_inches, block.height_inches)
            if block.alignment:
                paragraph.alignment = alignment(block.alignment)
    has_sect = len(body) and body[-1].tag == _SECT_PR
    start = count_before - (1 if has_sect else 0)
    end = len(body) - (1 if has_sect else 0)
    return list(body)[start:end]


def _add_list(document: Any, items: list[str | ListItem], numbered: bool) -> list[Any]:
    base = "List Number" if numbered else "List Bullet"
    paragraphs = []
    for position, item in enumerate(items):
        text, level = (item, 0) if isinstance(item, str) else (item.text, item.level)
        style = base if level == 0 else f"{base} {level + 1}"
        if _has_style(document, style):
            paragraphs.append(document.add_paragraph(text, style=style))
        else:
            marker = f"{position + 1}. " if numbered else "\u2022 "
            paragraph = document.add_paragraph("    " * level + marker + text)
            paragraphs.append(paragraph)
    return paragraphs


def _document_has_numbered_items(document: Any, new_paragraphs: list[Any]) -> bool:
    """Whether a "List Number" paragraph precedes the new list (numbering would continue it)."""
    first = new_paragraphs[0]._p
    for paragraph in document.paragraphs:
        if paragraph._p is first:
            return False
        if paragraph.style is not None and (paragraph.style.name or "").startswith("List Number"):
            return True
    return False


def _restart_numbering(document: Any, paragraphs: list[Any]) -> None:
    """Give a numbered list its own numbering instance starting at 1 (else Word continues
    the previous list's count)."""
    style = paragraphs[0].style
    style_num = (
        style.element.find(f"{qn('w:pPr')}/{qn('w:numPr')}/{qn('w:numId')}") if style is not None else None
    )
    if style_num is None:
        return
    try:
        numbering = document.part.numbering_part.element
    except Exception:
        return
    num_id = style_num.get(qn("w:val"))
    existing = numbering.find(f"{qn('w:num')}[@{qn('w:numId')}='{num_id}']")
    if existing is None:
        return
    abstract = existing.find(qn("w:abstractNumId")).get(qn("w:val"))
    new_id = str(max(int(n.get(qn("w:numId"))) for n in numbering.findall(qn("w:num"))) + 1)
    num = _oxml.OxmlElement("w:num")
    num.set(qn("w:numId"), new_id)
    abstract_ref = _oxml.OxmlElement("w:abstractNumId")
    abstract_ref.set(qn("w:val"), abstract)
    num.append(abstract_ref)
    override = _oxml.OxmlElement("w:lvlOverride")
    override.set(qn("w:ilvl"), "0")
    start = _oxml.OxmlElement("w:startOverride")
    start.set(qn("w:val"), "1")
    override.append(start)
    num.append(override)
    numbering.append(num)
    for paragraph in paragraphs:
        if paragraph.style is None or paragraph.style.style_id != style.style_id:
            continue
        properties = paragraph._p.get_or_add_pPr()
        num_pr = properties.get_or_add_numPr()
        num_pr.get_or_add_ilvl().val = 0
        num_pr.get_or_add_numId().val = int(new_id)


def add_table(document: Any, rows: list[list[Any]], *, header: bool, style: str | None) -> Any:
    """Append a table; cell values are written as text, a header row is bold and repeats."""
    n_cols = max(len(row) for row in rows)
    table = document.add_table(rows=len(rows), cols=n_cols)
    chosen = style or ("Table Grid" if _has_table_style(document, "Table Grid") else None)
    if chosen:
        if not _has_table_style(document, chosen):
            raise ToolError(
                ErrorCode.invalid_argument, f"table style {chosen!r} does not exist in the document"
            )
        table.style = chosen
    for r, row in enumerate(rows):
        for c in range(n_cols):
            value = row[c] if c < len(row) else ""
            cell = table.cell(r, c)
            cell.text = "" if value is None else str(value)
            if header and r == 0:
                for run in cell.paragraphs[0].runs:
                    run.bold = True
    if header:
        header_row = table.rows[0]._tr.get_or_add_trPr()
        header_row.append(_oxml.OxmlElement("w:tblHeader"))
    return table


def _has_table_style(document: Any, name: str) -> bool:
    return any(s.type == _style.WD_STYLE_TYPE.TABLE and name in (s.name, s.style_id) for s in document.styles)


def set_orientation(section: Any, orientation: str) -> None:
    """Set a section's orientation, swapping page width and height when it changes."""
    wanted = _section.WD_ORIENT.LANDSCAPE if orientation == "landscape" else _section.WD_ORIENT.PORTRAIT
    width, height = section.page_width, section.page_height
    if width is not None and height is not None:
        long_side, short_side = max(width, height), min(width, height)
        section.page_width = long_side if wanted == _section.WD_ORIENT.LANDSCAPE else short_side
        section.page_height = short_side if wanted == _section.WD_ORIENT.LANDSCAPE else long_side
    section.orientation = wanted


def add_picture(run: Any, image: BinaryIO, shown: str, width: float | None, height: float | None) -> None:
    """Add an inline picture to ``run``; a file that is not a readable image is refused."""
    try:
        run.add_picture(
            image,
            width=_shared.Inches(width) if width else None,
            height=_shared.Inches(height) if height else None,
        )
    except Exception as exc:
        raise ToolError(
            ErrorCode.unsupported, f"image {shown} is not a supported image file ({type(exc).__name__})"
        ) from exc


def place(elements: list[Any], target: Target, position: str) -> None:
    """Move body-level ``elements`` to ``position`` relative to ``target``.

    Paragraphs and tables go before/after a paragraph or table; into a container (body,
    cell, header) at its start or end. A run target means its paragraph.
    """
    if not elements:
        return
    anchor = target.paragraph if target.kind == "run" else target.element
    kind = "paragraph" if target.kind == "run" else target.kind
    if kind == "row":
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: a table row cannot hold blocks; use a cell",
        )
    if kind in ("paragraph", "table"):
        if position in ("before", "start"):
            for element in elements:
                anchor.addprevious(element)
        else:
            for element in reversed(elements):
                anchor.addnext(element)
        return
    # A container: keep its properties element first and the body's sectPr last.
    children = list(anchor)
    if position in ("start", "before"):
        index = 0
        while index < len(children) and children[index].tag in (qn("w:tcPr"),):
            index += 1
        for offset, element in enumerate(elements):
            anchor.insert(index + offset, element)
    else:
        last = children[-1] if children else None
        for element in elements:
            if last is not None and last.tag == _SECT_PR and last.getparent() is anchor:
                last.addprevious(element)
            else:
                anchor.append(element)
    if anchor.tag == qn("w:tc") and not any(child.tag in (W_P,) for child in anchor):
        anchor.append(_oxml.OxmlElement("w:p"))  # a cell must end with a paragraph
    if anchor.tag == qn("w:tc") and anchor[-1].tag == W_TBL:
        anchor.append(_oxml.OxmlElement("w:p"))
