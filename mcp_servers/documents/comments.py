"""Comments: read them with the text they are anchored to, add one on an element, delete."""

from __future__ import annotations

from typing import Any

from docx.oxml.ns import qn
from docx.text.run import Run

from mcp_servers._core.errors import ToolError
from mcp_servers.documents.body import W_P, W_TBL, Target, block_elements, cells_of, paragraphs_of, rows_of
from mcp_servers.documents.text_edit import W_T, live_runs, run_text

_ANCHORS = (qn("w:commentRangeStart"), qn("w:commentRangeEnd"), qn("w:commentReference"))


def _has_comments_part(document: Any) -> bool:
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    return any(rel.reltype == RT.COMMENTS for rel in document.part.rels.values())


def _paragraph_ids(document: Any) -> tuple[dict[int, str], list[Any]]:
    """(id(paragraph element) -> identifier, the elements) for every body paragraph (cells
    too). The element list keeps the lxml proxies alive, so their ids stay valid."""
    found: dict[int, str] = {}
    alive: list[Any] = []

    def visit(container: Any, prefix: str) -> None:
        p_index = t_index = 0
        for element in block_elements(container):
            if element.tag == W_P:
                found[id(element)] = f"{prefix}.p.{p_index}"
                alive.append(element)
                p_index += 1
            elif element.tag == W_TBL:
                for r, row in enumerate(rows_of(element)):
                    for c, cell in enumerate(cells_of(row)):
                        visit(cell, f"{prefix}.tbl.{t_index}.r.{r}.c.{c}")
                t_index += 1

    visit(document.element.body, "body")
    return found, alive


def read_comments(document: Any) -> list[dict[str, Any]]:
    """Every comment: id, author, initials, date, text, anchored text and paragraph id."""
    if not _has_comments_part(document):
        return []
    body = document.element.body
    paragraph_ids, _alive = _paragraph_ids(document)
    # Walk the body once, collecting the text between each comment's range markers.
    open_ranges: dict[str, list[str]] = {}
    anchored: dict[str, str] = {}
    anchor_paragraph: dict[str, str] = {}
    for element in body.iter(qn("w:commentRangeStart"), qn("w:commentRangeEnd"), W_T, qn("w:delText")):
        if element.tag == qn("w:commentRangeStart"):
            comment_id = element.get(qn("w:id"))
            open_ranges[comment_id] = []
            paragraph = next((a for a in element.iterancestors(W_P)), None)
            if paragraph is not None and id(paragraph) in paragraph_ids:
                anchor_paragraph[comment_id] = paragraph_ids[id(paragraph)]
        elif element.tag == qn("w:commentRangeEnd"):
            comment_id = element.get(qn("w:id"))
            if comment_id in open_ranges:
                anchored[comment_id] = "".join(open_ranges.pop(comment_id))
        else:
            for parts in open_ranges.values():
                parts.append(element.text or "")
    comments = []
    for comment in document.comments:
        key = str(comment.comment_id)
        comments.append(
            {
                "comment_id": comment.comment_id,
                "author": comment.author,
                "initials": comment.initials,
                "date": comment.timestamp.isoformat() if comment.timestamp else None,
                "text": comment.text,
                "anchored_text": anchored.get(key, ""),
                "anchor": anchor_paragraph.get(key),
            }
        )
    return comments


def add_comment(target: Target, text: str, author: str, initials: str | None, document: Any) -> int:
    """Anchor a new comment on a run, a paragraph (all its runs) or a cell; returns its id."""
    if not text.strip():
        raise ToolError("invalid_argument", "text: a comment needs text", argument="text")
    if target.kind == "run":
        runs = [target.element]
    elif target.kind == "paragraph":
        runs = live_runs(target.element)
    elif target.kind == "container" and target.element.tag == qn("w:tc"):
        runs = [run for paragraph in paragraphs_of(target.element) for run in live_runs(paragraph)]
    else:
        raise ToolError(
            "invalid_argument",
            f"identifier {target.identifier!r}: comments anchor on a paragraph, run or table cell",
            argument="identifier",
        )
    runs = [run for run in runs if run_text(run)] or runs
    if not runs:
        raise ToolError(
            "invalid_argument",
            f"identifier {target.identifier!r}: the element has no text to comment on",
            argument="identifier",
        )
    if target.area != "body":
        raise ToolError(
            "unsupported", "comments can only be anchored in the document body", argument="identifier"
        )
    comment = document.add_comment(
        [Run(runs[0], None), Run(runs[-1], None)], text=text, author=author, initials=initials
    )
    return comment.comment_id


def delete_comment(document: Any, comment_id: int) -> None:
    """Remove a comment and its anchors (ToolError ``not_found`` for an unknown id)."""
    if not _has_comments_part(document) or document.comments.get(comment_id) is None:
        raise ToolError("not_found", f"comment_id: no comment with id {comment_id}", argument="comment_id")
    comment = document.comments.get(comment_id)
    comment._comment_elm.getparent().remove(comment._comment_elm)
    for element in list(document.element.body.iter(*_ANCHORS)):
        if element.get(qn("w:id")) == str(comment_id):
            parent = element.getparent()
            parent.remove(element)
            # The reference lives in its own run; drop the run if nothing else is left.
            if parent.tag == qn("w:r") and all(child.tag == qn("w:rPr") for child in parent):
                parent.getparent().remove(parent)
