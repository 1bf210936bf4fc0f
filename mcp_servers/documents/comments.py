"""Comments: add one on an element, delete one (reading: :mod:`atoll.formats.docx.comments`)."""

from __future__ import annotations

from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.docx.comments import has_comments_part
from atoll.formats.docx.elements import (
    live_runs,
    paragraphs_of,
    run_text,
)
from atoll.formats.docx.names import qn
from mcp_servers._core.errors import ToolError
from mcp_servers.documents.body import Target

# python-docx is imported on the first call that needs it, not when the server is built.
_run = lazy_module("docx.text.run")


_ANCHORS = (qn("w:commentRangeStart"), qn("w:commentRangeEnd"), qn("w:commentReference"))


def add_comment(target: Target, text: str, author: str, initials: str | None, document: Any) -> int:
    """Anchor a new comment on a run, a paragraph (all its runs) or a cell; returns its id."""
    if not text.strip():
        raise ToolError(ErrorCode.invalid_argument, "text: a comment needs text", argument="text")
    if target.kind == "run":
        runs = [target.element]
    elif target.kind == "paragraph":
        runs = live_runs(target.element)
    elif target.kind == "container" and target.element.tag == qn("w:tc"):
        runs = [run for paragraph in paragraphs_of(target.element) for run in live_runs(paragraph)]
    else:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: comments anchor on a paragraph, run or table cell",
            argument="identifier",
        )
    runs = [run for run in runs if run_text(run)] or runs
    if not runs:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"identifier {target.identifier!r}: the element has no text to comment on",
            argument="identifier",
        )
    if target.area != "body":
        raise ToolError(
            ErrorCode.unsupported, "comments can only be anchored in the document body", argument="identifier"
        )
    comment = document.add_comment(
        [_run.Run(runs[0], None), _run.Run(runs[-1], None)], text=text, author=author, initials=initials
    )
    return comment.comment_id


def delete_comment(document: Any, comment_id: int) -> None:
    """Remove a comment and its anchors (ToolError ``not_found`` for an unknown id)."""
    if not has_comments_part(document) or document.comments.get(comment_id) is None:
        raise ToolError(
            ErrorCode.not_found, f"comment_id: no comment with id {comment_id}", argument="comment_id"
        )
    comment = document.comments.get(comment_id)
    comment._comment_elm.getparent().remove(comment._comment_elm)
    for element in list(document.element.body.iter(*_ANCHORS)):
        if element.get(qn("w:id")) == str(comment_id):
            parent = element.getparent()
            parent.remove(element)
            # The reference lives in its own run; drop the run if nothing else is left.
            if parent.tag == qn("w:r") and all(child.tag == qn("w:rPr") for child in parent):
                parent.getparent().remove(parent)
