"""Write .pptx decks (title, bullets, table, speaker notes) deterministically.

A slide is a dict: ``{"layout": "title", "title", "subtitle"}``,
``{"layout": "bullets", "title", "bullets": [...]}`` or
``{"layout": "table", "title", "rows": [[...], ...]}``; any slide may carry ``"notes"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pptx import Presentation
from pptx.util import Inches, Pt

from atoll_sample._files import freeze_properties, normalize_ooxml

_TITLE, _TITLE_AND_CONTENT, _TITLE_ONLY = 0, 1, 5


def write_deck(
    path: Path, slides: list[dict[str, Any]], *, author: str = "atoll sample", title: str = ""
) -> None:
    """Write ``slides`` to ``path`` (parents created); byte-identical for identical input."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deck = Presentation()
    freeze_properties(deck.core_properties, author=author, title=title)
    for spec in slides:
        layout = spec["layout"]
        if layout == "title":
            slide = deck.slides.add_slide(deck.slide_layouts[_TITLE])
            slide.shapes.title.text = spec["title"]
            slide.placeholders[1].text = spec.get("subtitle", "")
        elif layout == "bullets":
            slide = deck.slides.add_slide(deck.slide_layouts[_TITLE_AND_CONTENT])
            slide.shapes.title.text = spec["title"]
            frame = slide.placeholders[1].text_frame
            for i, bullet in enumerate(spec["bullets"]):
                paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
                paragraph.text = bullet
        elif layout == "table":
            slide = deck.slides.add_slide(deck.slide_layouts[_TITLE_ONLY])
            slide.shapes.title.text = spec["title"]
            rows = spec["rows"]
            shape = slide.shapes.add_table(
                len(rows), len(rows[0]), Inches(0.5), Inches(1.6), Inches(9), Inches(0.4) * len(rows)
            )
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    cell = shape.table.cell(r, c)
                    cell.text = str(value)
                    for paragraph in cell.text_frame.paragraphs:
                        for run in paragraph.runs:
                            run.font.size = Pt(12)
        else:
            raise ValueError(f"unknown slide layout {layout!r}")
        if spec.get("notes"):
            slide.notes_slide.notes_text_frame.text = spec["notes"]
    deck.save(path)
    normalize_ooxml(path)
