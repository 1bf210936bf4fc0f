"""Reading and rewriting the text of paragraphs and runs without losing formatting.

A paragraph's text is the concatenation of its runs' ``w:t`` (text), ``w:tab`` (``\\t``)
and ``w:br``/``w:cr`` (``\\n``) children; runs inside tracked deletions are not part of it.
:func:`replace_text` changes the text by editing only the characters that differ (common
prefix and suffix are kept in place), so untouched runs keep their formatting, inserted
text takes the formatting of the character before it, and runs holding images, fields or
other non-text content are never removed.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

from atoll._lazy import lazy_module
from atoll.formats.docx.elements import (
    W_PPR,
    W_R,
    W_RPR,
    W_T,
    Atom,
    atoms_of_runs,
    live_runs,
)
from atoll.formats.docx.names import qn

# python-docx is imported on the first call that needs it, not when the server is built.
_oxml = lazy_module("docx.oxml")


_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


def _text_elements(text: str) -> list[Any]:
    """``w:t``/``w:tab``/``w:br`` elements spelling ``text``."""
    elements: list[Any] = []
    buffer = ""

    def flush() -> None:
        nonlocal buffer
        if buffer:
            t = _oxml.OxmlElement("w:t")
            t.text = buffer
            t.set(_XML_SPACE, "preserve")
            elements.append(t)
            buffer = ""

    for char in text:
        if char in "\t\n":
            flush()
            elements.append(_oxml.OxmlElement("w:tab" if char == "\t" else "w:br"))
        elif char != "\r":
            buffer += char
    flush()
    return elements


def _set_t(element: Any, text: str) -> None:
    element.text = text
    element.set(_XML_SPACE, "preserve")


def _splice(atom: Atom, offset: int, insert: str) -> None:
    """Insert ``insert`` into an editable atom at ``offset`` (tabs/breaks become elements)."""
    current = atom.element.text or ""
    merged = current[:offset] + insert + current[offset:]
    if "\t" not in insert and "\n" not in insert:
        _set_t(atom.element, merged)
        return
    replacement = _text_elements(merged)
    parent = atom.element.getparent()
    index = parent.index(atom.element)
    parent.remove(atom.element)
    for position, element in enumerate(replacement):
        parent.insert(index + position, element)


def _new_run_like(template: Any | None) -> Any:
    run = _oxml.OxmlElement("w:r")
    if template is not None:
        properties = template.find(W_RPR)
        if properties is not None:
            run.append(copy.deepcopy(properties))
    return run


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
# Below this similarity the new text is treated as a rewrite: one change region, so the
# new words do not get scattered over the old runs' formatting.
_REWRITE_RATIO = 0.4


def _changes(old_text: str, new_text: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) regions turning ``old_text`` into ``new_text``, left to right.

    Word-level diff: "grew 12% in 2023" -> "grew 15% in 2024" gives two small changes, so
    each lands in the run it belongs to.
    """
    old_tokens, new_tokens = _TOKEN.findall(old_text), _TOKEN.findall(new_text)
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    if matcher.ratio() < _REWRITE_RATIO:
        limit = min(len(old_text), len(new_text))
        start = 0
        while start < limit and old_text[start] == new_text[start]:
            start += 1
        tail = 0
        while tail < limit - start and old_text[-1 - tail] == new_text[-1 - tail]:
            tail += 1
        return [(start, len(old_text) - tail, new_text[start : len(new_text) - tail])]
    old_offsets = [0]
    for token in old_tokens:
        old_offsets.append(old_offsets[-1] + len(token))
    changes = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changes.append((old_offsets[i1], old_offsets[i2], "".join(new_tokens[j1:j2])))
    return changes


def replace_text(runs: list[Any], new_text: str, *, anchor: Any, drop_empty: bool = True) -> None:
    """Make the text of ``runs`` equal ``new_text``, changing only what differs.

    ``anchor`` receives a new run (appended) when ``runs`` hold no editable text at all:
    a paragraph element, or a run (then the text goes into that run).
    """
    new_text = new_text.replace("\r\n", "\n")
    old_text = "".join(atom.text for atom in atoms_of_runs(runs))
    if old_text == new_text:
        return
    touched: set[int] = set()
    # Right to left, so the offsets of the changes still to apply stay valid.
    for start, old_end, middle in reversed(_changes(old_text, new_text)):
        current = [run for run in runs if run.getparent() is not None]
        _apply_change(current, start, old_end, middle, anchor, touched)
    if drop_empty:
        _drop_empty(runs, touched)


def _apply_change(
    runs: list[Any], start: int, old_end: int, middle: str, anchor: Any, touched: set[int]
) -> None:
    atoms = atoms_of_runs(runs)
    # Choose where the inserted text goes before deleting: the atom holding the first
    # replaced character, else the one holding the character just before the change
    # (inserted text inherits its formatting), else the first one after.
    spans: list[tuple[int, int, Atom]] = []
    position = 0
    for atom in atoms:
        spans.append((position, position + len(atom.text), atom))
        position += len(atom.text)
    host: tuple[int, Atom] | None = None
    if old_end > start:  # a replacement takes the formatting of the text it replaces
        host = next(((b, a) for b, e, a in spans if a.editable and b <= start < e), None)
    if host is None:
        for begin, end, atom in spans:
            if atom.editable and begin < start <= end:
                host = (begin, atom)
    if host is None:
        for begin, _end, atom in spans:
            if atom.editable and begin >= start:
                host = (begin, atom)
                break
    for begin, end, atom in spans:
        low, high = max(begin, start), min(end, old_end)
        if low >= high:
            continue
        touched.add(id(atom.run))
        if atom.editable:
            text = atom.element.text or ""
            _set_t(atom.element, text[: low - begin] + text[high - begin :])
        else:
            atom.element.getparent().remove(atom.element)
    if middle:
        if host is not None:
            begin, atom = host
            _splice(atom, max(0, start - begin), middle)
            touched.add(id(atom.run))
        else:
            _insert_without_host(runs, spans, start, middle, anchor)


def _insert_without_host(
    runs: list[Any], spans: list[tuple[int, int, Atom]], start: int, middle: str, anchor: Any
) -> None:
    """Insert text when no editable ``w:t`` exists (empty paragraph, only tabs or images)."""
    if anchor.tag == W_R:
        for element in _text_elements(middle):
            anchor.append(element)
        return
    template = runs[-1] if runs else None
    run = _new_run_like(template)
    for element in _text_elements(middle):
        run.append(element)
    # Place the run next to the fixed atom at the change, else after the last run.
    before = next((atom for begin, _end, atom in spans if begin >= start), None)
    if before is not None:
        before.run.addprevious(run)
    elif runs:
        runs[-1].addnext(run)
    else:
        anchor.append(run)


def _drop_empty(runs: list[Any], touched: set[int]) -> None:
    for run in runs:
        if id(run) not in touched:
            continue
        for child in list(run.iterchildren()):
            if child.tag == W_T and not child.text:
                run.remove(child)
        if all(child.tag == W_RPR for child in run.iterchildren()) and run.getparent() is not None:
            run.getparent().remove(run)


def set_paragraph_text(paragraph: Any, new_text: str) -> None:
    replace_text(live_runs(paragraph), new_text, anchor=paragraph)


def set_run_text(run: Any, new_text: str) -> None:
    replace_text([run], new_text, anchor=run, drop_empty=False)


def new_paragraph_like(reference: Any | None, text: str, *, keep_style: bool) -> Any:
    """A new ``w:p`` with ``text``; with ``keep_style`` it copies the reference's paragraph
    properties (style, numbering, alignment) and its paragraph-mark run formatting, as Word
    does when Enter is pressed at the end of that paragraph."""
    paragraph = _oxml.OxmlElement("w:p")
    run = _oxml.OxmlElement("w:r")
    if reference is not None and keep_style:
        properties = reference.find(W_PPR)
        if properties is not None:
            copied = copy.deepcopy(properties)
            for section in copied.findall(qn("w:sectPr")):
                copied.remove(section)
            paragraph.append(copied)
            mark = copied.find(W_RPR)
            if mark is not None:
                run.append(copy.deepcopy(mark))
                for revision in run.find(W_RPR).findall(qn("w:ins")) + run.find(W_RPR).findall(qn("w:del")):
                    run.find(W_RPR).remove(revision)
    for element in _text_elements(text):
        run.append(element)
    if text:
        paragraph.append(run)
    return paragraph
