"""Write .docx documents (headings, tables, bold runs, comments) deterministically.

A document is a list of blocks:
``("heading", text, level)``, ``("para", text_or_runs)``, ``("bullets", [items])``,
``("numbered", [items])``, ``("table", rows)`` (first row is the header),
``("comment", text_or_runs, author, comment_text)`` (a paragraph carrying a comment),
``("page_break",)``.  Runs are ``[(text, bold), ...]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docx

from atoll_sample._files import freeze_properties, normalize_ooxml

Block = tuple[Any, ...]


def write_document(path: Path, blocks: list[Block], *, author: str = "atoll sample", title: str = "") -> None:
    """Write ``blocks`` to ``path`` (parents created); byte-identical for identical input."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = docx.Document()
    freeze_properties(document.core_properties, author=author, title=title)
    for block in blocks:
        kind = block[0]
        if kind == "heading":
            document.add_heading(block[1], level=block[2])
        elif kind == "para":
            _add_runs(document.add_paragraph(), block[1])
        elif kind == "comment":
            paragraph = document.add_paragraph()
            runs = _add_runs(paragraph, block[1])
            initials = "".join(part[0] for part in block[2].split())
            document.add_comment(runs, text=block[3], author=block[2], initials=initials)
        elif kind in ("bullets", "numbered"):
            style = "List Bullet" if kind == "bullets" else "List Number"
            for item in block[1]:
                _add_runs(document.add_paragraph(style=style), item)
        elif kind == "table":
            rows = block[1]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    cell = table.cell(r, c)
                    cell.text = str(value)
                    if r == 0:
                        for run in cell.paragraphs[0].runs:
                            run.bold = True
        elif kind == "page_break":
            document.add_page_break()
        else:
            raise ValueError(f"unknown document block {kind!r}")
    document.save(path)
    normalize_ooxml(path)


def _add_runs(paragraph, content) -> list:
    if isinstance(content, str):
        content = [(content, False)]
    runs = []
    for text, bold in content:
        run = paragraph.add_run(text)
        run.bold = bold or None
        runs.append(run)
    return runs
