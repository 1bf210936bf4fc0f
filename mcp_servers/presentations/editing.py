"""Deck edits: run-level text replacement and the edit_slides operations."""

from __future__ import annotations

from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.pptx import iter_shapes
from mcp_servers._core.errors import ToolError
from mcp_servers.presentations.models import SlideOperation
from mcp_servers.presentations.shape_ops import apply_shape_operation, placeholder_shape
from mcp_servers.presentations.slides import (
    body_frame,
    delete_slide,
    duplicate_slide,
    get_slide,
    move_slide,
    set_text_keep_format,
    subtitle_shape,
    title_shape,
    write_bullets,
)

_pptx_oxml_ns = lazy_module("pptx.oxml.ns")


def _text_frames(slide: Any) -> list[Any]:
    frames = []
    for shape in iter_shapes(slide.shapes):
        if shape.has_text_frame:
            frames.append(shape.text_frame)
        if getattr(shape, "has_table", False) and shape.has_table:
            frames.extend(cell.text_frame for row in shape.table.rows for cell in row.cells)
    return frames


def _text_runs(paragraph: Any) -> list[Any]:
    """The ``a:r`` and ``a:fld`` elements of a paragraph (both hold an ``a:t``)."""
    return [
        child for child in paragraph._p if child.tag in (_pptx_oxml_ns.qn("a:r"), _pptx_oxml_ns.qn("a:fld"))
    ]


def replace_in_paragraph(paragraph: Any, search: str, replace: str, match_case: bool) -> int:
    """Replace every occurrence of ``search`` in the paragraph, touching only the runs that
    hold it: a match inside one run changes that run's text; a match spanning runs puts
    the replacement in the first of them and removes the matched text from the others.
    Returns the number of replacements."""
    runs = _text_runs(paragraph)
    pieces = [(run, run.find(_pptx_oxml_ns.qn("a:t"))) for run in runs]
    texts = [(t.text or "") if t is not None else "" for _run, t in pieces]
    full = "".join(texts)
    haystack, needle = (full, search) if match_case else (full.lower(), search.lower())
    matches = []
    start = haystack.find(needle)
    while start != -1:
        matches.append(start)
        start = haystack.find(needle, start + len(needle))
    if not matches:
        return 0
    offsets = []
    position = 0
    for text in texts:
        offsets.append(position)
        position += len(text)
    for match in reversed(matches):
        end = match + len(search)
        first = True
        for index, (_run, t) in enumerate(pieces):
            if t is None:
                continue
            begin, finish = offsets[index], offsets[index] + len(texts[index])
            low, high = max(begin, match), min(finish, end)
            if low >= high:
                continue
            text = texts[index]
            inserted = replace if first else ""
            texts[index] = text[: low - begin] + inserted + text[high - begin :]
            first = False
        # Recompute offsets after this replacement (texts changed length).
        offsets, position = [], 0
        for text in texts:
            offsets.append(position)
            position += len(text)
    for (_run, t), text in zip(pieces, texts, strict=True):
        if t is not None and t.text != text:
            t.text = text
    return len(matches)


def replace_text(
    deck: Any,
    search: str,
    replace: str,
    slide_index: int | None,
    match_case: bool,
    include_notes: bool = False,
) -> int:
    """Replace ``search`` in every text frame and table cell of one slide or all slides (and
    their speaker notes with ``include_notes``)."""
    if not search:
        raise ToolError(ErrorCode.invalid_argument, "search: must not be empty", argument="search")
    slides = [get_slide(deck, slide_index)] if slide_index is not None else list(deck.slides)
    count = 0
    for slide in slides:
        frames = _text_frames(slide)
        if include_notes and slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            frames.append(slide.notes_slide.notes_text_frame)
        for frame in frames:
            for paragraph in frame.paragraphs:
                count += replace_in_paragraph(paragraph, search, replace, match_case)
    return count


def _require(operation: SlideOperation, number: int, *fields: str) -> None:
    for name in fields:
        _given(operation, number, name)


def _given(operation: SlideOperation, number: int, name: str) -> Any:
    """The operation's field ``name``; ToolError when the operation leaves it out."""
    value = getattr(operation, name)
    if value is None:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"operations[{number}] ({operation.type}): '{name}' is required",
            argument="operations",
        )
    return value


def apply_operation(deck: Any, operation: SlideOperation, number: int) -> dict[str, Any]:
    """Apply one operation; returns a short record of what changed."""
    kind = operation.type
    if kind == "replace_text":
        count = replace_text(
            deck,
            _given(operation, number, "search"),
            _given(operation, number, "replace"),
            operation.slide_index,
            operation.match_case,
            operation.include_notes,
        )
        return {"type": kind, "replacements": count}
    slide_index = _given(operation, number, "slide_index")
    slide = get_slide(deck, slide_index)
    if kind in ("update_title", "update_subtitle"):
        field = "title" if kind == "update_title" else "subtitle"
        _require(operation, number, field)
        shape = title_shape(slide) if field == "title" else subtitle_shape(slide)
        if shape is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"operations[{number}]: slide {operation.slide_index} has no {field} placeholder",
            )
        set_text_keep_format(shape.text_frame, getattr(operation, field))
    elif kind in ("add_bullets", "replace_bullets"):
        bullets = _given(operation, number, "bullets")
        if operation.placeholder:
            frame = placeholder_shape(slide, operation.placeholder, number, create_body=True).text_frame
        else:
            frame = body_frame(slide, create=True)
        write_bullets(frame, bullets, append=kind == "add_bullets")
    elif kind == "set_notes":
        _require(operation, number, "notes")
        slide.notes_slide.notes_text_frame.text = operation.notes
    elif kind == "delete_slide":
        delete_slide(deck, slide_index)
    elif kind == "duplicate_slide":
        new_index = duplicate_slide(deck, slide_index)
        if operation.position is not None and operation.position != new_index:
            move_slide(deck, new_index, operation.position)
            new_index = operation.position
        return {"type": kind, "new_slide_index": new_index}
    elif kind == "move_slide":
        move_slide(deck, slide_index, _given(operation, number, "to_index"))
    else:
        return apply_shape_operation(slide, operation, number)
    return {"type": kind, "slide_index": operation.slide_index}
