"""Editing operations addressed by identifier: add, edit and delete text; formatting."""

from __future__ import annotations

import copy
import re
from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.docx.elements import (
    W_P,
    W_RPR,
    W_TBL,
    block_elements,
    live_runs,
    paragraph_text,
    paragraphs_of,
    run_text,
    runs_of,
)
from atoll.formats.docx.names import qn
from atoll.formats.docx.reading import StyleNames, paragraph_kind
from mcp_servers._core.errors import ToolError
from mcp_servers._office.colors import parse_color
from mcp_servers.documents.blocks import alignment, paragraph_style, place
from mcp_servers.documents.body import Target
from mcp_servers.documents.text_edit import new_paragraph_like, set_paragraph_text, set_run_text

# python-docx is imported on the first call that needs it, not when the server is built.
_text = lazy_module("docx.enum.text")
_oxml = lazy_module("docx.oxml")
_shared = lazy_module("docx.shared")
_paragraph = lazy_module("docx.text.paragraph")
_run = lazy_module("docx.text.run")


POSITIONS = ("before", "after", "start", "end")
_SECT_PR = qn("w:sectPr")


def add_text(document: Any, target: Target, text: str, position: str, style: str | None) -> str:
    """Insert ``text`` relative to ``target``; returns what was done (for the result).

    Paragraph: ``start``/``end`` add text inside it (taking the formatting of the
    neighbouring run); ``before``/``after`` add new paragraph(s) — one per line of
    ``text`` — styled like the anchor (a heading's neighbour gets the Normal style).
    Run: ``start``/``end`` inside the run, ``before``/``after`` a new run with its
    formatting. Table: a new paragraph before/after it. Container (``body``, a cell, a
    header): new paragraph(s) at its start or end.
    """
    if position not in POSITIONS:
        raise ToolError(
            ErrorCode.invalid_argument, f"position: expected one of {', '.join(POSITIONS)}, got {position!r}"
        )
    if target.kind == "row":
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: address a cell (….c.<col>) to add text",
        )
    if target.kind == "paragraph" and position in ("start", "end"):
        current = paragraph_text(target.element)
        set_paragraph_text(target.element, text + current if position == "start" else current + text)
        return f"added text at the {position} of {target.identifier}"
    if target.kind == "run":
        if position in ("start", "end"):
            current = run_text(target.element)
            set_run_text(target.element, text + current if position == "start" else current + text)
            return f"added text at the {position} of {target.identifier}"
        run = _oxml.OxmlElement("w:r")
        properties = target.element.find(W_RPR)
        if properties is not None:
            run.append(copy.deepcopy(properties))
        (target.element.addprevious if position == "before" else target.element.addnext)(run)
        set_run_text(run, text)
        return f"added a run {position} {target.identifier}"
    lines = text.replace("\r\n", "\n").split("\n")
    if target.kind == "paragraph":
        reference = target.element
    elif target.kind == "container":
        children = paragraphs_of(target.element)
        reference = (children[0] if position in ("start", "before") else children[-1]) if children else None
    else:
        reference = None
    keep_style = reference is not None and _keeps_style(document, reference)
    new = [new_paragraph_like(reference, line, keep_style=keep_style) for line in lines]
    place(new, target, position)
    if style:
        chosen = paragraph_style(document, style)
        for element in new:
            _paragraph.Paragraph(element, None).style = chosen
    return f"added {len(new)} paragraph(s) {position} {target.identifier}"


def _keeps_style(document: Any, reference: Any) -> bool:
    if reference.tag != W_P:
        return False
    kind, _level = paragraph_kind(reference, StyleNames(document).of(reference))
    return kind != "heading"


def edit_text(target: Target, new_text: str) -> str:
    """Replace the text of a paragraph, run or cell, keeping formatting and images.

    A cell's text is its paragraphs joined by newlines: line k goes to paragraph k, extra
    lines become paragraphs like the last one, missing lines remove paragraphs.
    """
    if target.kind == "paragraph":
        set_paragraph_text(target.element, new_text)
    elif target.kind == "run":
        set_run_text(target.element, new_text)
    elif target.kind == "container" and target.element.tag == qn("w:tc"):
        _set_cell_text(target.element, new_text)
    elif target.kind == "container":
        _set_container_text(target.element, new_text)
    else:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: a {target.kind} has no text of its own; address a paragraph, run or cell",
        )
    return f"replaced the text of {target.identifier}"


def _set_cell_text(cell: Any, new_text: str) -> None:
    lines = new_text.replace("\r\n", "\n").split("\n")
    paragraphs = paragraphs_of(cell)
    for index, line in enumerate(lines):
        if index < len(paragraphs):
            set_paragraph_text(paragraphs[index], line)
        else:
            previous = paragraphs[-1] if paragraphs else None
            paragraph = new_paragraph_like(previous, line, keep_style=True)
            if previous is not None:
                previous.addnext(paragraph)
            else:
                cell.append(paragraph)
            paragraphs.append(paragraph)
    for extra in paragraphs[len(lines) :]:
        if not any(True for _ in extra.iter(qn("w:drawing"))):
            extra.getparent().remove(extra)


def _set_container_text(container: Any, new_text: str) -> None:
    """Header/footer/body text: paragraphs only (tables inside are left alone)."""
    _set_cell_text(container, new_text)


def delete(target: Target, scope: str, collapse_whitespace: bool = False) -> str:
    """Delete an element (``scope="element"``) or only its text (``scope="content"``,
    alias ``"text"``).

    Images, fields and other non-text content survive ``content``. A paragraph that ends a
    section and a table cell's last paragraph are emptied, not removed. With
    ``collapse_whitespace`` the doubled spaces a deleted run leaves in its paragraph are
    collapsed.
    """
    if scope not in ("element", "content", "text"):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"scope: expected 'content' or 'element', got {scope!r}",
            argument="scope",
        )
    scope = "text" if scope == "content" else scope
    result = _delete(target, scope)
    if collapse_whitespace and target.kind == "run" and target.paragraph.getparent() is not None:
        text = paragraph_text(target.paragraph)
        set_paragraph_text(target.paragraph, re.sub(r" {2,}", " ", text).strip())
    return result


def _delete(target: Target, scope: str) -> str:
    if target.kind == "container" and scope == "element" and target.element.tag != qn("w:tc"):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: a body, header or footer cannot be deleted; use scope='text'",
            argument="scope",
        )
    if scope == "text" or target.kind == "container":
        if target.kind in ("table", "row"):
            for paragraph in target.element.iter(W_P):
                set_paragraph_text(paragraph, "")
        elif target.kind == "container":
            for element in list(block_elements(target.element)):
                if element.tag == W_P:
                    set_paragraph_text(element, "")
                elif scope == "element":
                    element.getparent().remove(element)
            if target.element.tag == qn("w:tc"):
                paragraphs = paragraphs_of(target.element)
                for extra in paragraphs[1:]:
                    if not paragraph_text(extra) and next(extra.iter(qn("w:drawing")), None) is None:
                        extra.getparent().remove(extra)
        else:
            edit_text(target, "")
        return f"cleared the text of {target.identifier}"
    element = target.element
    if target.kind == "paragraph":
        if element.find(f"{qn('w:pPr')}/{_SECT_PR}") is not None:
            set_paragraph_text(element, "")
            return f"cleared {target.identifier} (it ends a section, so it was kept)"
        parent = element.getparent()
        if parent.tag == qn("w:tc") and len(paragraphs_of(parent)) == 1:
            set_paragraph_text(element, "")
            return f"cleared {target.identifier} (a cell keeps at least one paragraph)"
        parent.remove(element)
        if parent.tag == qn("w:tc") and parent[-1].tag == W_TBL:
            parent.append(_oxml.OxmlElement("w:p"))
        return f"deleted {target.identifier}; later paragraphs moved up one index"
    if target.kind == "row":
        table = element.getparent()
        element.getparent().remove(element)
        if not any(child.tag == qn("w:tr") for child in table):
            table.getparent().remove(table)
        return f"deleted {target.identifier}"
    parent = element.getparent()
    parent.remove(element)
    if target.kind == "table" and parent.tag == qn("w:tc") and not any(c.tag == W_P for c in parent):
        parent.append(_oxml.OxmlElement("w:p"))
    return f"deleted {target.identifier}"


def _runs_for_formatting(target: Target) -> tuple[list[Any], list[Any]]:
    """(runs, paragraphs) touched by formatting ``target``."""
    if target.kind == "run":
        return [target.element], []
    if target.kind == "paragraph":
        return live_runs(target.element), [target.element]
    paragraphs = list(target.element.iter(W_P))
    runs = [run for paragraph in paragraphs for run in runs_of(paragraph)]
    return runs, paragraphs


def apply_formatting(document: Any, target: Target, formatting: dict[str, Any]) -> list[str]:
    """Apply run and paragraph formatting; returns the names of what was set.

    Run properties (bold, italic, underline, strikethrough, font_size, font_color,
    font_name, highlight) go to every run addressed; alignment and style need a
    paragraph (or an element containing paragraphs).
    """
    runs, paragraphs = _runs_for_formatting(target)
    applied: list[str] = []
    for run_element in runs:
        run = _run.Run(run_element, None)
        font = run.font
        for flag in ("bold", "italic", "underline", "strikethrough"):
            if formatting.get(flag) is not None:
                setattr(font, "strike" if flag == "strikethrough" else flag, formatting[flag])
        if formatting.get("font_size") is not None:
            font.size = _shared.Pt(formatting["font_size"])
        if formatting.get("font_color") is not None:
            font.color.rgb = parse_color(formatting["font_color"], "font_color", _shared.RGBColor.from_string)
        if formatting.get("font_name") is not None:
            font.name = formatting["font_name"]
            fonts = run_element.get_or_add_rPr().get_or_add_rFonts()
            fonts.set(qn("w:eastAsia"), formatting["font_name"])
            fonts.set(qn("w:cs"), formatting["font_name"])
        if formatting.get("highlight") is not None:
            font.highlight_color = parse_highlight(formatting["highlight"])
    run_keys = (
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "font_size",
        "font_color",
        "font_name",
        "highlight",
    )
    applied.extend(key for key in run_keys if formatting.get(key) is not None)
    for key in ("alignment", "style"):
        if formatting.get(key) is None:
            continue
        if not paragraphs:
            raise ToolError(
                ErrorCode.invalid_argument, f"{key}: applies to paragraphs; {target.identifier!r} is a run"
            )
        for element in paragraphs:
            paragraph = _paragraph.Paragraph(element, None)
            if key == "alignment":
                paragraph.alignment = alignment(formatting[key])
            else:
                paragraph.style = paragraph_style(document, formatting[key])
        applied.append(key)
    return applied


def parse_highlight(value: str) -> Any:
    names = {member.name.lower(): member for member in _text.WD_COLOR_INDEX if member.name}
    key = value.strip().lower().replace(" ", "_")
    if key in ("none", "no_highlight", ""):
        return None
    if key not in names:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"highlight: {value!r} is not one of {', '.join(sorted(names))}",
            argument="highlight",
        )
    return names[key]
