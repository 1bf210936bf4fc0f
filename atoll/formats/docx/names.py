"""WordprocessingML element names in Clark notation, without importing python-docx."""

from __future__ import annotations

_NAMESPACES = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
}


def qn(tag: str) -> str:
    """``"w:p"`` -> ``"{http://…/main}p"`` (what ``docx.oxml.ns.qn`` gives)."""
    prefix, local = tag.split(":", 1)
    return f"{{{_NAMESPACES[prefix]}}}{local}"
