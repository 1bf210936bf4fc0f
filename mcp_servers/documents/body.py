"""Resolving the element identifiers of a .docx (:mod:`atoll.formats.docx.elements`
defines them) to the elements the editing tools change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from atoll.errors import ErrorCode
from atoll.formats.docx.elements import cells_of, paragraphs_of, rows_of, runs_of, tables_of
from mcp_servers._core.errors import ToolError


@dataclass
class Target:
    """An addressed element: its kind, lxml element and identifier.

    ``kind`` is one of ``container`` (body, header, footer or table cell), ``paragraph``,
    ``run``, ``table``, ``row``; ``paragraph`` is the enclosing paragraph of a run;
    ``area`` is ``body``, ``header`` or ``footer``.
    """

    kind: str
    element: Any
    identifier: str
    area: str
    paragraph: Any = None


def _index(tokens: list[str], position: int, identifier: str) -> int:
    if position >= len(tokens):
        raise ToolError(
            ErrorCode.invalid_argument, f"identifier {identifier!r}: a number is missing at the end"
        )
    token = tokens[position]
    if not token.isdigit():
        raise ToolError(ErrorCode.invalid_argument, f"identifier {identifier!r}: {token!r} is not a number")
    return int(token)


def _pick(items: list[Any], index: int, what: str, identifier: str, prefix: str) -> Any:
    if index >= len(items):
        raise ToolError(
            ErrorCode.not_found,
            f"identifier {identifier!r}: {prefix} has {len(items)} {what}(s), no index {index}",
        )
    return items[index]


def resolve(document: Any, identifier: object) -> Target:
    """Resolve an identifier (see the module docstring) against a python-docx Document.

    Raises ToolError ``invalid_argument`` (malformed identifier) or ``not_found`` (an index
    past the end, a section that does not exist).
    """
    if not isinstance(identifier, str) or not identifier.strip():
        raise ToolError(
            ErrorCode.invalid_argument,
            "identifier: expected a string such as 'body.p.0'",
            argument="identifier",
        )
    ident = identifier.strip()
    tokens = ident.split(".")
    area = tokens[0]
    if area == "body":
        container = document.element.body
        position = 1
        prefix = "body"
    elif area in ("header", "footer"):
        if len(tokens) < 3 or tokens[1] != "s":
            raise ToolError(
                ErrorCode.invalid_argument, f"identifier {ident!r}: expected {area}.s.<section>[.p.<i>…]"
            )
        section_index = _index(tokens, 2, ident)
        sections = document.sections
        section = _pick(list(sections), section_index, "section", ident, "the document")
        part = section.header if area == "header" else section.footer
        container = part._element  # follows "linked to previous" like Word does
        position = 3
        prefix = ".".join(tokens[:3])
    else:
        raise ToolError(
            ErrorCode.invalid_argument, f"identifier {ident!r}: must start with 'body', 'header' or 'footer'"
        )
    target = Target("container", container, prefix, area)
    while position < len(tokens):
        token = tokens[position]
        if target.kind != "container":
            raise ToolError(
                ErrorCode.invalid_argument,
                f"identifier {ident!r}: unexpected {token!r} after {target.identifier}",
            )
        if token == "p":
            index = _index(tokens, position + 1, ident)
            paragraph = _pick(paragraphs_of(container), index, "paragraph", ident, prefix)
            prefix = f"{prefix}.p.{index}"
            target = Target("paragraph", paragraph, prefix, area, paragraph)
            position += 2
            if position < len(tokens):
                if tokens[position] != "r":
                    raise ToolError(
                        ErrorCode.invalid_argument, f"identifier {ident!r}: expected 'r' after {prefix}"
                    )
                run_index = _index(tokens, position + 1, ident)
                run = _pick(runs_of(paragraph), run_index, "run", ident, prefix)
                prefix = f"{prefix}.r.{run_index}"
                target = Target("run", run, prefix, area, paragraph)
                position += 2
                if position < len(tokens):
                    raise ToolError(
                        ErrorCode.invalid_argument, f"identifier {ident!r}: nothing can follow a run"
                    )
        elif token == "tbl":
            index = _index(tokens, position + 1, ident)
            table = _pick(tables_of(container), index, "table", ident, prefix)
            prefix = f"{prefix}.tbl.{index}"
            target = Target("table", table, prefix, area)
            position += 2
            if position < len(tokens):
                if tokens[position] != "r":
                    raise ToolError(
                        ErrorCode.invalid_argument, f"identifier {ident!r}: expected 'r' after {prefix}"
                    )
                row_index = _index(tokens, position + 1, ident)
                row = _pick(rows_of(table), row_index, "row", ident, prefix)
                prefix = f"{prefix}.r.{row_index}"
                target = Target("row", row, prefix, area)
                position += 2
                if position < len(tokens):
                    if tokens[position] != "c":
                        raise ToolError(
                            ErrorCode.invalid_argument, f"identifier {ident!r}: expected 'c' after {prefix}"
                        )
                    col_index = _index(tokens, position + 1, ident)
                    cell = _pick(cells_of(row), col_index, "cell", ident, prefix)
                    prefix = f"{prefix}.c.{col_index}"
                    container = cell
                    target = Target("container", cell, prefix, area)
                    position += 2
        else:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"identifier {ident!r}: expected 'p' or 'tbl' after {target.identifier}",
            )
    return target
