"""Document order and stable element identifiers of a .docx.

Identifiers address elements by position, counted in document order inside their
container (content controls ``w:sdt`` and ``w:customXml`` wrappers are looked through):

- ``body`` — the document body (a container);
- ``body.p.{i}`` — the i-th paragraph of the body; ``body.p.{i}.r.{j}`` — its j-th run;
- ``body.tbl.{t}`` — the t-th table; ``.r.{row}`` a row; ``.r.{row}.c.{col}`` a cell
  (a container again: ``….c.{col}.p.{k}[.r.{j}]`` and nested ``….c.{col}.tbl.{u}…``);
- ``header.s.{sec}`` / ``footer.s.{sec}`` — the default header/footer of section ``sec``
  (containers: ``header.s.0.p.0``, ``footer.s.1.tbl.0.r.0.c.1``).

Paragraph and table counters are separate (``body.p.3`` is the fourth paragraph whatever
the tables before it). Runs are the ``w:r`` elements of the paragraph, including those
inside hyperlinks and tracked insertions/deletions, in order. Cells are counted
physically (a horizontally merged cell is one cell).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from docx.oxml.ns import qn

from mcp_servers._core.errors import ToolError

W_P, W_TBL, W_TR, W_TC, W_R = qn("w:p"), qn("w:tbl"), qn("w:tr"), qn("w:tc"), qn("w:r")
W_SDT, W_SDT_CONTENT, W_CUSTOM_XML = qn("w:sdt"), qn("w:sdtContent"), qn("w:customXml")
W_DEL, W_MOVE_FROM = qn("w:del"), qn("w:moveFrom")
# Elements inside a paragraph that may hold runs (looked through when listing runs).
_RUN_CONTAINERS = {
    qn(tag)
    for tag in (
        "w:hyperlink",
        "w:ins",
        "w:del",
        "w:moveTo",
        "w:moveFrom",
        "w:smartTag",
        "w:customXml",
        "w:fldSimple",
        "w:sdt",
        "w:sdtContent",
        "w:dir",
        "w:bdo",
    )
}
_WRAPPERS = {W_SDT, W_SDT_CONTENT, W_CUSTOM_XML}


def block_elements(container: Any) -> Iterator[Any]:
    """The ``w:p`` and ``w:tbl`` children of a container, in order, wrappers looked through."""
    for child in container.iterchildren():
        tag = child.tag
        if tag in (W_P, W_TBL):
            yield child
        elif tag in _WRAPPERS:
            yield from block_elements(child)


def paragraphs_of(container: Any) -> list[Any]:
    return [el for el in block_elements(container) if el.tag == W_P]


def tables_of(container: Any) -> list[Any]:
    return [el for el in block_elements(container) if el.tag == W_TBL]


def runs_of(paragraph: Any) -> list[Any]:
    """The runs of a paragraph in order (hyperlinks, insertions and deletions looked through)."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        for child in node.iterchildren():
            if child.tag == W_R:
                found.append(child)
            elif child.tag in _RUN_CONTAINERS:
                walk(child)

    walk(paragraph)
    return found


def is_deleted(run: Any, paragraph: Any) -> bool:
    """Whether the run sits inside a tracked deletion (``w:del``/``w:moveFrom``)."""
    node = run.getparent()
    while node is not None and node is not paragraph:
        if node.tag in (W_DEL, W_MOVE_FROM):
            return True
        node = node.getparent()
    return False


def rows_of(table: Any) -> list[Any]:
    return [child for child in table.iterchildren() if child.tag == W_TR]


def cells_of(row: Any) -> list[Any]:
    cells: list[Any] = []
    for child in row.iterchildren():
        if child.tag == W_TC:
            cells.append(child)
        elif child.tag in _WRAPPERS:
            cells.extend(cells_of(child))
    return cells


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
        raise ToolError("invalid_argument", f"identifier {identifier!r}: a number is missing at the end")
    token = tokens[position]
    if not token.isdigit():
        raise ToolError("invalid_argument", f"identifier {identifier!r}: {token!r} is not a number")
    return int(token)


def _pick(items: list[Any], index: int, what: str, identifier: str, prefix: str) -> Any:
    if index >= len(items):
        raise ToolError(
            "not_found",
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
            "invalid_argument", "identifier: expected a string such as 'body.p.0'", argument="identifier"
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
            raise ToolError("invalid_argument", f"identifier {ident!r}: expected {area}.s.<section>[.p.<i>…]")
        section_index = _index(tokens, 2, ident)
        sections = document.sections
        section = _pick(list(sections), section_index, "section", ident, "the document")
        part = section.header if area == "header" else section.footer
        container = part._element  # follows "linked to previous" like Word does
        position = 3
        prefix = ".".join(tokens[:3])
    else:
        raise ToolError(
            "invalid_argument", f"identifier {ident!r}: must start with 'body', 'header' or 'footer'"
        )
    target = Target("container", container, prefix, area)
    while position < len(tokens):
        token = tokens[position]
        if target.kind != "container":
            raise ToolError(
                "invalid_argument", f"identifier {ident!r}: unexpected {token!r} after {target.identifier}"
            )
        if token == "p":
            index = _index(tokens, position + 1, ident)
            paragraph = _pick(paragraphs_of(container), index, "paragraph", ident, prefix)
            prefix = f"{prefix}.p.{index}"
            target = Target("paragraph", paragraph, prefix, area, paragraph)
            position += 2
            if position < len(tokens):
                if tokens[position] != "r":
                    raise ToolError("invalid_argument", f"identifier {ident!r}: expected 'r' after {prefix}")
                run_index = _index(tokens, position + 1, ident)
                run = _pick(runs_of(paragraph), run_index, "run", ident, prefix)
                prefix = f"{prefix}.r.{run_index}"
                target = Target("run", run, prefix, area, paragraph)
                position += 2
                if position < len(tokens):
                    raise ToolError("invalid_argument", f"identifier {ident!r}: nothing can follow a run")
        elif token == "tbl":
            index = _index(tokens, position + 1, ident)
            table = _pick(tables_of(container), index, "table", ident, prefix)
            prefix = f"{prefix}.tbl.{index}"
            target = Target("table", table, prefix, area)
            position += 2
            if position < len(tokens):
                if tokens[position] != "r":
                    raise ToolError("invalid_argument", f"identifier {ident!r}: expected 'r' after {prefix}")
                row_index = _index(tokens, position + 1, ident)
                row = _pick(rows_of(table), row_index, "row", ident, prefix)
                prefix = f"{prefix}.r.{row_index}"
                target = Target("row", row, prefix, area)
                position += 2
                if position < len(tokens):
                    if tokens[position] != "c":
                        raise ToolError(
                            "invalid_argument", f"identifier {ident!r}: expected 'c' after {prefix}"
                        )
                    col_index = _index(tokens, position + 1, ident)
                    cell = _pick(cells_of(row), col_index, "cell", ident, prefix)
                    prefix = f"{prefix}.c.{col_index}"
                    container = cell
                    target = Target("container", cell, prefix, area)
                    position += 2
        else:
            raise ToolError(
                "invalid_argument", f"identifier {ident!r}: expected 'p' or 'tbl' after {target.identifier}"
            )
    return target
