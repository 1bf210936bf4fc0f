"""Reading the comments of a .docx with the text they are anchored to."""

from __future__ import annotations

from typing import Any

from atoll.formats.docx.elements import W_P, W_T, W_TBL, block_elements, cells_of, rows_of
from atoll.formats.docx.names import qn


def has_comments_part(document: Any) -> bool:
    """Whether the document has a comments part at all."""
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
    if not has_comments_part(document):
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
