"""Reading a .docx in document order: blocks, images, tracked changes, pages.

A *block* is a body-level paragraph or table, listed in the order they appear (the
reference reads all paragraphs, then all tables). Printed pages are only known to a
layout engine, so ``printed_page`` counts explicit breaks: hard page breaks, "page break
before", section breaks that start a new page, and the page breaks Word records when it
saves (``w:lastRenderedPageBreak``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atoll.formats.docx.elements import (
    W_BR,
    W_P,
    W_TBL,
    W_TC,
    block_elements,
    cells_of,
    is_deleted,
    paragraph_text,
    paragraphs_of,
    rows_of,
    run_text,
    runs_of,
)
from atoll.formats.docx.names import qn

_EMU_PER_INCH = 914400
A_BLIP = qn("a:blip")
W_DRAWING = qn("w:drawing")
R_EMBED = qn("r:embed")
R_LINK = qn("r:link")
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


@dataclass
class ImageRef:
    """An inline or floating picture of the body, numbered in document order."""

    annotation: str
    paragraph_id: str
    run_index: int
    rel_id: str | None
    name: str
    description: str
    width_emu: int
    height_emu: int
    drawing: Any = field(repr=False, default=None)

    def summary(self) -> dict[str, Any]:
        return {
            "annotation": self.annotation,
            "paragraph": self.paragraph_id,
            "run": f"{self.paragraph_id}.r.{self.run_index}",
            "name": self.name,
            "description": self.description,
            "width_inches": round(self.width_emu / _EMU_PER_INCH, 2),
            "height_inches": round(self.height_emu / _EMU_PER_INCH, 2),
        }


class StyleNames:
    """Style id -> style name (``Heading1`` -> ``Heading 1``) of one document."""

    def __init__(self, document: Any) -> None:
        self._names: dict[str, str] = {}
        try:
            for style in document.styles:
                if style.style_id:
                    self._names[style.style_id] = style.name or style.style_id
        except Exception:  # a broken styles part should not make the text unreadable
            pass

    def of(self, paragraph: Any) -> str:
        style = paragraph.find(f"{qn('w:pPr')}/{qn('w:pStyle')}")
        if style is None:
            return "Normal"
        style_id = style.get(qn("w:val")) or ""
        return self._names.get(style_id, style_id)


def paragraph_kind(paragraph: Any, style: str) -> tuple[str, int | None]:
    """(``heading``|``list_item``|``paragraph``, level or None)."""
    lowered = style.lower()
    if lowered == "title":
        return "heading", 0
    if lowered.startswith("heading "):
        tail = lowered.split()[-1]
        return "heading", int(tail) if tail.isdigit() else 1
    numbering = paragraph.find(f"{qn('w:pPr')}/{qn('w:numPr')}")
    if numbering is not None or lowered.startswith("list"):
        level = 0
        if numbering is not None:
            ilvl = numbering.find(qn("w:ilvl"))
            if ilvl is not None and (ilvl.get(qn("w:val")) or "").isdigit():
                level = int(ilvl.get(qn("w:val")))
        elif lowered[-1:].isdigit():
            level = int(lowered[-1]) - 1
        return "list_item", level
    return "paragraph", None


def tracked_changes(paragraph: Any) -> list[dict[str, Any]]:
    """Insertions and deletions recorded in the paragraph (author, date, text)."""
    changes = []
    for element in paragraph.iter(qn("w:ins"), qn("w:del")):
        if element.getparent() is not None and element.getparent().tag == qn("w:rPr"):
            continue  # a paragraph-mark revision, no text of its own
        text = "".join(run_text(run) for run in element.iter(qn("w:r")))
        changes.append(
            {
                "type": "insertion" if element.tag == qn("w:ins") else "deletion",
                "author": element.get(qn("w:author")) or "",
                "date": element.get(qn("w:date")) or "",
                "text": text,
            }
        )
    return changes


def marked_text(paragraph: Any) -> str:
    """Paragraph text with tracked changes shown as CriticMarkup ``{++ins++}`` ``{--del--}``."""
    parts = []
    for run in runs_of(paragraph):
        text = run_text(run)
        if not text:
            continue
        parent = run.getparent()
        while parent is not None and parent is not paragraph and parent.tag not in (qn("w:ins"), qn("w:del")):
            parent = parent.getparent()
        if parent is not None and parent.tag == qn("w:del"):
            parts.append("{--" + text + "--}")
        elif parent is not None and parent.tag == qn("w:ins"):
            parts.append("{++" + text + "++}")
        else:
            parts.append(text)
    return "".join(parts)


def collect_images(document: Any) -> list[ImageRef]:
    """Every picture of the body (tables included), numbered ``image.0``, ``image.1``, …."""
    images: list[ImageRef] = []

    def visit_paragraph(paragraph: Any, identifier: str) -> None:
        for run_index, run in enumerate(runs_of(paragraph)):
            for drawing in run.iter(W_DRAWING):
                blip = next(drawing.iter(A_BLIP), None)
                extent = next(drawing.iter(qn("wp:extent")), None)
                doc_pr = next(drawing.iter(qn("wp:docPr")), None)
                images.append(
                    ImageRef(
                        annotation=f"image.{len(images)}",
                        paragraph_id=identifier,
                        run_index=run_index,
                        rel_id=None if blip is None else (blip.get(R_EMBED) or blip.get(R_LINK)),
                        name="" if doc_pr is None else doc_pr.get("name", ""),
                        description="" if doc_pr is None else doc_pr.get("descr", ""),
                        width_emu=int(extent.get("cx", 0)) if extent is not None else 0,
                        height_emu=int(extent.get("cy", 0)) if extent is not None else 0,
                        drawing=drawing,
                    )
                )

    def visit_container(container: Any, prefix: str) -> None:
        p_index = t_index = 0
        for element in block_elements(container):
            if element.tag == W_P:
                visit_paragraph(element, f"{prefix}.p.{p_index}")
                p_index += 1
            else:
                table_id = f"{prefix}.tbl.{t_index}"
                for r, row in enumerate(rows_of(element)):
                    for c, cell in enumerate(cells_of(row)):
                        visit_container(cell, f"{table_id}.r.{r}.c.{c}")
                t_index += 1

    visit_container(document.element.body, "body")
    return images


def _page_breaks(paragraph: Any) -> tuple[bool, bool]:
    """(a page starts with this paragraph, a page starts right after it)."""
    before = paragraph.find(f"{qn('w:pPr')}/{qn('w:pageBreakBefore')}") is not None
    after = False
    seen_text = False
    for run in runs_of(paragraph):
        for child in run.iterchildren():
            if child.tag == qn("w:t") and child.text:
                seen_text = True
            elif (child.tag == W_BR and child.get(qn("w:type")) == "page") or child.tag == qn(
                "w:lastRenderedPageBreak"
            ):
                if seen_text:
                    after = True
                else:
                    before = True
    section = paragraph.find(f"{qn('w:pPr')}/{qn('w:sectPr')}")
    if section is not None:
        kind = section.find(qn("w:type"))
        after = after or kind is None or kind.get(qn("w:val")) != "continuous"
    return before, after


def read_blocks(document: Any, *, include_runs: bool = False, name: str = "document") -> list[dict[str, Any]]:
    """Every body block in document order with its identifier, kind, style, text and page.

    Raises :class:`~atoll.formats.bounds.InputTooLarge` naming ``name`` when the body holds
    more paragraphs and table cells than ``max_blocks`` (checked before any is rendered).
    """
    check_block_count(document, name)
    styles = StyleNames(document)
    images_by_paragraph: dict[str, list[str]] = {}
    for image in collect_images(document):
        images_by_paragraph.setdefault(image.paragraph_id, []).append(image.annotation)
    blocks: list[dict[str, Any]] = []
    rels = document.part.rels
    page = 0
    p_index = t_index = 0
    pending_break = False
    section = 0
    for element in block_elements(document.element.body):
        if element.tag == W_P:
            identifier = f"body.p.{p_index}"
            p_index += 1
            starts, ends = _page_breaks(element)
            if blocks and (pending_break or starts):
                page += 1
            pending_break = ends
            block = _paragraph_block(
                element, identifier, styles, images_by_paragraph, include_runs, page, rels
            )
            block["section"] = section
            blocks.append(block)
            # A paragraph carrying sectPr is the last one of its section.
            if element.find(f"{qn('w:pPr')}/{qn('w:sectPr')}") is not None:
                section += 1
        elif element.tag == W_TBL:
            identifier = f"body.tbl.{t_index}"
            t_index += 1
            if pending_break and blocks:
                page += 1
            pending_break = False
            block = _table_block(element, identifier, styles, images_by_paragraph, page)
            block["section"] = section
            blocks.append(block)
    return blocks


def check_block_count(document: Any, name: str) -> None:
    """Refuse a body of more than ``max_blocks`` paragraphs and table cells (counted by lxml,
    without building proxies): rendering one costs ~0.1 ms, so the cap bounds the time."""
    from atoll.formats import bounds

    limit = bounds.LIMITS.max_blocks
    for count, _ in enumerate(document.element.body.iter(W_P, W_TC), start=1):
        if count > limit:
            raise bounds.InputTooLarge(
                f"{name}: has more than {limit} paragraphs and table cells (limit {limit})"
            )


def _paragraph_block(
    paragraph: Any,
    identifier: str,
    styles: StyleNames,
    images: dict[str, list[str]],
    include_runs: bool,
    page: int,
    rels: Any,
) -> dict[str, Any]:
    style = styles.of(paragraph)
    kind, level = paragraph_kind(paragraph, style)
    block: dict[str, Any] = {
        "id": identifier,
        "type": kind,
        "style": style,
        "text": paragraph_text(paragraph),
    }
    if level is not None:
        block["level"] = level
    changes = tracked_changes(paragraph)
    if changes:
        block["tracked_changes"] = changes
        block["marked_text"] = marked_text(paragraph)
    if images.get(identifier):
        block["images"] = images[identifier]
    links = _links(paragraph, rels)
    if links:
        block["links"] = links
    boxes = _text_boxes(paragraph)
    if boxes:
        block["text_boxes"] = boxes
    if include_runs:
        block["runs"] = [
            _run_summary(run, paragraph, f"{identifier}.r.{j}") for j, run in enumerate(runs_of(paragraph))
        ]
    block["printed_page"] = page
    return block


def _text_boxes(paragraph: Any) -> list[str]:
    """Text of the text boxes anchored in the paragraph (read only; not addressable)."""
    boxes = []
    for content in paragraph.iter(qn("w:txbxContent")):
        if any(ancestor.tag == qn("w:txbxContent") for ancestor in content.iterancestors()):
            continue  # nested box: part of the outer one's text
        if any(ancestor.tag == _MC_FALLBACK for ancestor in content.iterancestors()):
            continue  # the VML copy of a DrawingML box
        lines = [paragraph_text(inner) for inner in content.iter(W_P)]
        boxes.append("\n".join(line for line in lines if line))
    return [box for box in boxes if box]


def _links(paragraph: Any, rels: Any) -> list[dict[str, str]]:
    """The paragraph's hyperlinks: text and target (a URL, or ``#bookmark``)."""
    links = []
    for link in paragraph.iter(qn("w:hyperlink")):
        text = "".join(run_text(run) for run in link.iter(qn("w:r")))
        rel_id = link.get(qn("r:id"))
        if rel_id and rel_id in rels:
            target = rels[rel_id].target_ref
        else:
            target = "#" + (link.get(qn("w:anchor")) or "")
        links.append({"text": text, "target": target})
    return links


def _run_summary(run: Any, paragraph: Any, identifier: str) -> dict[str, Any]:
    properties = run.find(qn("w:rPr"))
    summary: dict[str, Any] = {"id": identifier, "text": run_text(run)}
    if properties is not None:
        for flag in ("b", "i", "u", "strike"):
            element = properties.find(qn(f"w:{flag}"))
            if element is not None and element.get(qn("w:val")) not in ("0", "false", "none"):
                summary[{"b": "bold", "i": "italic", "u": "underline", "strike": "strikethrough"}[flag]] = (
                    True
                )
        size = properties.find(qn("w:sz"))
        if size is not None and (size.get(qn("w:val")) or "").isdigit():
            summary["font_size"] = int(size.get(qn("w:val"))) / 2
        color = properties.find(qn("w:color"))
        if color is not None and color.get(qn("w:val")) not in (None, "auto"):
            summary["color"] = color.get(qn("w:val"))
        fonts = properties.find(qn("w:rFonts"))
        if fonts is not None and fonts.get(qn("w:ascii")):
            summary["font"] = fonts.get(qn("w:ascii"))
    if next(run.iter(W_DRAWING), None) is not None:
        summary["image"] = True
    if is_deleted(run, paragraph):
        summary["deleted"] = True
    return summary


def _table_block(
    table: Any, identifier: str, styles: StyleNames, images: dict[str, list[str]], page: int
) -> dict[str, Any]:
    rows: list[list[str]] = []
    marked_rows: list[list[str]] = []
    changes: list[dict[str, Any]] = []
    for r, row in enumerate(rows_of(table)):
        cells, marked_cells = [], []
        for c, cell in enumerate(cells_of(row)):
            cell_id = f"{identifier}.r.{r}.c.{c}"
            plain, marked, cell_changes = _cell_text(cell, cell_id, images)
            cells.append("\n".join(plain))
            marked_cells.append("\n".join(marked))
            changes.extend({**change, "cell": cell_id} for change in cell_changes)
        rows.append(cells)
        marked_rows.append(marked_cells)
    block: dict[str, Any] = {
        "id": identifier,
        "type": "table",
        "rows": rows,
        "n_rows": len(rows),
        "n_cols": max((len(row) for row in rows), default=0),
        "printed_page": page,
    }
    if changes:
        block["tracked_changes"] = changes
        block["marked_rows"] = marked_rows
    return block


def _cell_text(
    cell: Any, cell_id: str, images: dict[str, list[str]]
) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """(plain lines, lines with tracked changes marked, tracked changes) of a cell."""
    lines, marked_lines, changes = [], [], []
    for k, paragraph in enumerate(paragraphs_of(cell)):
        text = paragraph_text(paragraph)
        paragraph_changes = tracked_changes(paragraph)
        marked = marked_text(paragraph) if paragraph_changes else text
        for annotation in images.get(f"{cell_id}.p.{k}", []):
            text += f" [{annotation}]"
            marked += f" [{annotation}]"
        lines.append(text)
        marked_lines.append(marked)
        changes.extend(paragraph_changes)
    return lines, marked_lines, changes


def render_block(block: dict[str, Any]) -> str:
    """One block as readable text, prefixed with its identifier."""
    if block["type"] == "table":
        lines = [
            f"[{block['id']}] table {block['n_rows']}x{block['n_cols']} (cells: {block['id']}.r.<row>.c.<col>)"
        ]
        for index, row in enumerate(block.get("marked_rows", block["rows"])):
            cells = [cell.replace("\n", " / ").replace("|", "\\|") for cell in row]
            lines.append("| " + " | ".join(cells) + " |")
            if index == 0:
                lines.append("|" + "---|" * len(cells))
        return "\n".join(lines)
    text = block.get("marked_text", block["text"])
    if block["type"] == "heading":
        prefix = "#" * max(1, block.get("level") or 1) + " "
    elif block["type"] == "list_item":
        prefix = "  " * (block.get("level") or 0) + "- "
    else:
        prefix = ""
    extra = ""
    if block.get("images"):
        extra = " " + " ".join(f"[{annotation}]" for annotation in block["images"])
    for link in block.get("links", []):
        extra += f" <{link['text']}: {link['target']}>"
    for box in block.get("text_boxes", []):
        extra += " [text box: " + box.replace("\n", " / ") + "]"
    style = "" if block["style"] == "Normal" else f" ({block['style']})"
    return f"[{block['id']}]{style} {prefix}{text}{extra}".rstrip()
