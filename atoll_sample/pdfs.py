"""Write multi-page PDFs, including image-only "scanned" pages, deterministically.

A page is ``{"title": str, "lines": [str, ...]}`` (real text) or the same with
``"scanned": True``: the text is rendered, rasterized and embedded as a picture, so the
page holds no extractable text and only OCR can read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf

from atoll.formats.pdf import holds_mupdf

_PDF_DATE = "D:20240301090000Z"
_LETTER = pymupdf.paper_rect("letter")
_SCAN_DPI = 170


@holds_mupdf
def write_pdf(
    path: Path, pages: list[dict[str, Any]], *, title: str = "", author: str = "atoll sample"
) -> None:
    """Write ``pages`` to ``path`` (parents created); byte-identical for identical input."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = pymupdf.open()
    for spec in pages:
        if spec.get("scanned"):
            _add_scanned_page(document, spec)
        else:
            _draw_text(document.new_page(width=_LETTER.width, height=_LETTER.height), spec)
    document.set_metadata(
        {
            "title": title,
            "author": author,
            "creator": "atoll sample",
            "producer": "atoll sample",
            "creationDate": _PDF_DATE,
            "modDate": _PDF_DATE,
        }
    )
    document.save(path, garbage=3, deflate=True, no_new_id=True)
    document.close()


def _draw_text(page: pymupdf.Page, spec: dict[str, Any]) -> None:
    page.insert_text((72, 80), spec["title"], fontsize=15, fontname="hebo")
    body = "\n".join(spec["lines"])
    box = pymupdf.Rect(72, 100, _LETTER.width - 72, _LETTER.height - 72)
    overflow = page.insert_textbox(box, body, fontsize=11, fontname="helv", lineheight=1.35)
    if overflow < 0:
        raise ValueError(f"PDF page {spec['title']!r}: text does not fit on one page")


def _add_scanned_page(document: pymupdf.Document, spec: dict[str, Any]) -> None:
    scratch = pymupdf.open()
    _draw_text(scratch.new_page(width=_LETTER.width, height=_LETTER.height), spec)
    picture = scratch[0].get_pixmap(dpi=_SCAN_DPI, colorspace=pymupdf.csGRAY)
    scratch.close()
    page = document.new_page(width=_LETTER.width, height=_LETTER.height)
    page.insert_image(page.rect, stream=picture.tobytes("png"))
