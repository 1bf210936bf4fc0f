"""Document order, stable element identifiers and text of a .docx (the documents tools and
the grader read with these).

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

from atoll.formats.docx.names import qn

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


# --- text ------------------------------------------------------------------------------

W_T, W_TAB, W_BR, W_CR, W_RPR = qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr"), qn("w:rPr")
W_DEL_TEXT, W_PPR = qn("w:delText"), qn("w:pPr")


@dataclass
class Atom:
    """One piece of text: a ``w:t`` (editable) or a tab/break (a fixed one-character piece)."""

    run: Any
    element: Any
    editable: bool
    text: str


def atoms_of_runs(runs: list[Any]) -> list[Atom]:
    atoms: list[Atom] = []
    for run in runs:
        for child in run.iterchildren():
            if child.tag == W_T:
                atoms.append(Atom(run, child, True, child.text or ""))
            elif child.tag == W_TAB:
                atoms.append(Atom(run, child, False, "\t"))
            elif child.tag in (W_BR, W_CR) and child.get(qn("w:type")) in (None, "textWrapping"):
                atoms.append(Atom(run, child, False, "\n"))
    return atoms


def live_runs(paragraph: Any) -> list[Any]:
    """The paragraph's runs that are not tracked deletions."""
    return [run for run in runs_of(paragraph) if not is_deleted(run, paragraph)]


def paragraph_text(paragraph: Any) -> str:
    return "".join(atom.text for atom in atoms_of_runs(live_runs(paragraph)))


def run_text(run: Any) -> str:
    """A run's text (deleted text of a tracked deletion included)."""
    parts = []
    for child in run.iterchildren():
        if child.tag in (W_T, W_DEL_TEXT):
            parts.append(child.text or "")
        elif child.tag == W_TAB:
            parts.append("\t")
        elif child.tag in (W_BR, W_CR) and child.get(qn("w:type")) in (None, "textWrapping"):
            parts.append("\n")
    return "".join(parts)
