"""Slides: layouts by name, placeholders, text that keeps its formatting, slide order."""

from __future__ import annotations

import copy
from typing import Any, Literal, overload

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.pptx import TITLE_TYPES
from mcp_servers._core.errors import ToolError
from mcp_servers.presentations.models import BulletItem, SlideSpec, TableSpec

_pptx_enum_shapes = lazy_module("pptx.enum.shapes")
_pptx_oxml_ns = lazy_module("pptx.oxml.ns")
_pptx_util = lazy_module("pptx.util")

#: Layout names of the issue -> layout names to look for (first found wins) and the index
#: of that layout in the default template (used when a deck names its layouts otherwise).
LAYOUTS: dict[str, tuple[tuple[str, ...], int]] = {
    "title": (("Title Slide", "Title"), 0),
    "title_and_content": (("Title and Content", "Title, Content"), 1),
    "section_header": (("Section Header", "Section Title"), 2),
    "two_content": (("Two Content", "Two Objects", "Comparison"), 3),
    "title_only": (("Title Only",), 5),
    "blank": (("Blank",), 6),
}
# PP_PLACEHOLDER values as the ints they are (the enum is an int enum and compares equal), so
# that building the server does not import python-pptx; tests check them against the enum
# (TITLE_TYPES comes from atoll.formats.pptx, which reads titles with them).
#: PP_PLACEHOLDER.BODY, OBJECT, VERTICAL_BODY
BODY_TYPES = (2, 7, 6)
_EMU_PER_INCH = 914400


def find_layout(deck: Any, name: str | None) -> Any:
    """The slide layout for ``name`` (an issue layout name or a layout name of the deck)."""
    layouts = list(deck.slide_layouts)
    key = (name or "title_and_content").strip()
    wanted, fallback = LAYOUTS.get(key.lower(), ((key,), None))
    for candidate in wanted:
        for layout in layouts:
            if layout.name.strip().lower() == candidate.lower():
                return layout
    if fallback is not None and fallback < len(layouts):
        return layouts[fallback]
    names = ", ".join([*LAYOUTS, *(layout.name for layout in layouts)])
    raise ToolError(
        ErrorCode.invalid_argument, f"layout: unknown layout {name!r} (available: {names})", argument="layout"
    )


def get_slide(deck: Any, index: int | None, argument: str = "slide_index") -> Any:
    """The slide at 0-based ``index`` (ToolError ``not_found`` naming the slide count)."""
    slides = deck.slides
    if index is None or not isinstance(index, int) or not 0 <= index < len(slides):
        raise ToolError(
            ErrorCode.not_found if isinstance(index, int) else ErrorCode.invalid_argument,
            f"{argument}: the deck has {len(slides)} slide(s) (0-based), no slide {index}",
            argument=argument,
        )
    return slides[index]


def placeholder(slide: Any, types: tuple[Any, ...], nth: int = 0) -> Any | None:
    found = [ph for ph in slide.placeholders if ph.placeholder_format.type in types]
    found.sort(key=lambda ph: ph.placeholder_format.idx)
    return found[nth] if nth < len(found) else None


def title_shape(slide: Any) -> Any | None:
    return placeholder(slide, TITLE_TYPES)


def subtitle_shape(slide: Any) -> Any | None:
    found = placeholder(slide, (_pptx_enum_shapes.PP_PLACEHOLDER.SUBTITLE,))
    if found is None and slide.slide_layout.name.lower().startswith("section"):
        found = placeholder(slide, BODY_TYPES)
    return found


def set_text_keep_format(text_frame: Any, text: str) -> None:
    """Set a text frame's text; each line keeps the paragraph and first-run formatting of
    the paragraph it replaces (new lines copy the last paragraph)."""
    lines = text.replace("\r\n", "\n").split("\n")
    paragraphs = list(text_frame.paragraphs)
    for index, line in enumerate(lines):
        if index < len(paragraphs):
            set_paragraph_text(paragraphs[index], line)
        else:
            paragraphs.append(_append_paragraph_like(text_frame, paragraphs[-1], line))
    for extra in paragraphs[len(lines) :]:
        extra._p.getparent().remove(extra._p)


def set_paragraph_text(paragraph: Any, text: str) -> None:
    """Replace a paragraph's text, keeping its first run's formatting."""
    runs = list(paragraph.runs)
    if not runs:
        paragraph.add_run().text = text
        _copy_end_props(paragraph)
        return
    runs[0].text = text
    for run in runs[1:]:
        run._r.getparent().remove(run._r)
    for br in paragraph._p.findall(_pptx_oxml_ns.qn("a:br")):
        paragraph._p.remove(br)


def _copy_end_props(paragraph: Any) -> None:
    """A run added to an empty paragraph takes the paragraph's end-of-paragraph formatting."""
    end = paragraph._p.find(_pptx_oxml_ns.qn("a:endParaRPr"))
    if end is None:
        return
    run = paragraph.runs[-1]._r
    properties = copy.deepcopy(end)
    properties.tag = _pptx_oxml_ns.qn("a:rPr")
    existing = run.find(_pptx_oxml_ns.qn("a:rPr"))
    if existing is not None:
        run.remove(existing)
    run.insert(0, properties)


def _append_paragraph_like(text_frame: Any, template: Any, text: str) -> Any:
    new = copy.deepcopy(template._p)
    template._p.addnext(new)
    for paragraph in text_frame.paragraphs:
        if paragraph._p is new:
            set_paragraph_text(paragraph, text)
            return paragraph
    raise AssertionError("copied paragraph not found")


def bullet_items(items: list[str | BulletItem]) -> list[tuple[str, int]]:
    return [(item, 0) if isinstance(item, str) else (item.text, item.level) for item in items]


def write_bullets(text_frame: Any, items: list[str | BulletItem], *, append: bool) -> None:
    """Write bullet paragraphs (with levels); ``append`` keeps existing ones (an empty
    first paragraph is reused)."""
    pairs = bullet_items(items)
    paragraphs = list(text_frame.paragraphs)
    if not append:
        set_text_keep_format(text_frame, "\n".join(text for text, _level in pairs) if pairs else "")
        for paragraph, (_text, level) in zip(text_frame.paragraphs, pairs, strict=False):
            paragraph.level = level
        return
    for text, level in pairs:
        last = paragraphs[-1]
        if len(paragraphs) == 1 and not last.text and not last.runs:
            paragraph = last
            set_paragraph_text(paragraph, text)
        else:
            paragraph = _append_paragraph_like(text_frame, last, text)
        paragraph.level = level
        paragraphs = list(text_frame.paragraphs)


@overload
def body_frame(slide: Any, *, create: Literal[True]) -> Any: ...
@overload
def body_frame(slide: Any, *, create: bool) -> Any | None: ...
def body_frame(slide: Any, *, create: bool) -> Any | None:
    """The slide's content placeholder text frame; a text box under the title when the
    layout has none and ``create`` is set."""
    body = placeholder(slide, BODY_TYPES)
    if body is not None:
        return body.text_frame
    if not create:
        return None
    for shape in slide.shapes:
        if shape.name == "Bullets" and shape.has_text_frame:
            return shape.text_frame
    deck_width = slide.part.package.presentation_part.presentation.slide_width
    box = slide.shapes.add_textbox(
        _pptx_util.Inches(0.6),
        _pptx_util.Inches(1.6),
        deck_width - _pptx_util.Inches(1.2),
        _pptx_util.Inches(4.5),
    )
    box.name = "Bullets"
    box.text_frame.word_wrap = True
    return box.text_frame


def add_table(
    slide: Any,
    spec: TableSpec,
    *,
    left: float | None = None,
    top: float | None = None,
    width: float | None = None,
    height: float | None = None,
) -> Any:
    """Add a table (cell values as text, bold header row when ``spec.header``)."""
    rows = spec.rows
    if not rows or not any(rows):
        raise ToolError(ErrorCode.invalid_argument, "table: needs a non-empty 'rows' list", argument="table")
    n_cols = max(len(row) for row in rows)
    deck_width = slide.part.package.presentation_part.presentation.slide_width
    shape = slide.shapes.add_table(
        len(rows),
        n_cols,
        _pptx_util.Inches(0.5 if left is None else left),
        _pptx_util.Inches(1.6 if top is None else top),
        _pptx_util.Inches(width) if width else deck_width - _pptx_util.Inches(1.0),
        _pptx_util.Inches(height) if height else _pptx_util.Inches(0.4) * len(rows),
    )
    table = shape.table
    table.first_row = bool(spec.header)
    for r, row in enumerate(rows):
        for c in range(n_cols):
            value = row[c] if c < len(row) else ""
            cell = table.cell(r, c)
            cell.text = "" if value is None else str(value)
            for paragraph in cell.text_frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = _pptx_util.Pt(spec.font_size or 14)
                    if r == 0 and spec.header:
                        run.font.bold = True
    return shape


def fill_slide(slide: Any, spec: SlideSpec) -> None:
    """Write a slide spec's title, subtitle, bullets, columns, table and notes."""
    if spec.title is not None:
        shape = title_shape(slide)
        if shape is None:
            deck_width = slide.part.package.presentation_part.presentation.slide_width
            shape = slide.shapes.add_textbox(
                _pptx_util.Inches(0.5),
                _pptx_util.Inches(0.3),
                deck_width - _pptx_util.Inches(1.0),
                _pptx_util.Inches(1.0),
            )
            shape.name = "Title"
        shape.text_frame.text = spec.title
    if spec.subtitle is not None:
        shape = subtitle_shape(slide)
        if shape is None:
            raise ToolError(
                ErrorCode.invalid_argument,
                "subtitle: the slide's layout has no subtitle placeholder",
                argument="subtitle",
            )
        shape.text_frame.text = spec.subtitle
    if spec.bullets:
        frame = body_frame(slide, create=True)
        write_bullets(frame, spec.bullets, append=False)
    if spec.columns:
        for index, column in enumerate(spec.columns):
            target = placeholder(slide, BODY_TYPES, nth=index + (1 if spec.bullets else 0))
            if target is None:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"columns: the layout has no content placeholder for column {index} (use layout two_content)",
                    argument="columns",
                )
            write_bullets(target.text_frame, [column] if isinstance(column, str) else column, append=False)
    if spec.notes is not None:
        slide.notes_slide.notes_text_frame.text = spec.notes
    if spec.table is not None:
        add_table(slide, spec.table)
        remove_empty_placeholders(slide)  # the table takes the content area


def remove_empty_placeholders(slide: Any) -> None:
    """Drop content/subtitle placeholders left empty (they only say "Click to add text")."""
    for ph in list(slide.placeholders):
        kind = ph.placeholder_format.type
        if kind in TITLE_TYPES:
            continue
        if ph.has_text_frame and not ph.text_frame.text.strip():
            ph._element.getparent().remove(ph._element)


def move_slide(deck: Any, old_index: int, new_index: int) -> None:
    slide_ids = deck.slides._sldIdLst
    items = list(slide_ids)
    if not 0 <= new_index < len(items):
        raise ToolError(
            ErrorCode.not_found,
            f"to_index: the deck has {len(items)} slide(s), no position {new_index}",
            argument="to_index",
        )
    element = items[old_index]
    slide_ids.remove(element)
    slide_ids.insert(new_index, element)


def delete_slide(deck: Any, index: int) -> None:
    get_slide(deck, index)
    slide_ids = deck.slides._sldIdLst
    element = list(slide_ids)[index]
    deck.part.drop_rel(element.rId)
    slide_ids.remove(element)


def duplicate_slide(deck: Any, index: int) -> int:
    """Copy slide ``index`` right after it, with its images, charts (copied, so editing one
    does not change the other), links and notes. Returns the new slide's index."""
    from mcp_servers.presentations.cloning import clone_slide

    source = get_slide(deck, index)
    clone_slide(deck, source)
    move_slide(deck, len(deck.slides) - 1, index + 1)
    return index + 1
