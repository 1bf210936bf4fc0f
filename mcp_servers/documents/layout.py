"""Page setup per section (margins, orientation) and headers/footers."""

from __future__ import annotations

from typing import Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats.docx.elements import W_P, block_elements, paragraph_text, paragraphs_of
from mcp_servers._core.errors import ToolError
from mcp_servers.documents.blocks import set_orientation
from mcp_servers.documents.editing import _set_cell_text

# python-docx is imported on the first call that needs it, not when the server is built.
_shared = lazy_module("docx.shared")


_EMU_PER_INCH = 914400
MARGINS = ("top", "bottom", "left", "right")


def _inches(value: Any) -> float | None:
    return None if value is None else round(int(value) / _EMU_PER_INCH, 3)


def select_sections(document: Any, section_index: int | None) -> list[tuple[int, Any]]:
    """All sections, or the one asked for (ToolError ``not_found`` past the end)."""
    sections = list(document.sections)
    if section_index is None:
        return list(enumerate(sections))
    if not 0 <= section_index < len(sections):
        raise ToolError(
            ErrorCode.not_found,
            f"section_index: the document has {len(sections)} section(s), no index {section_index}",
            argument="section_index",
        )
    return [(section_index, sections[section_index])]


def page_setup(index: int, section: Any) -> dict[str, Any]:
    return {
        "section_index": index,
        "orientation": "landscape" if section.orientation == 1 else "portrait",
        "page_width_inches": _inches(section.page_width),
        "page_height_inches": _inches(section.page_height),
        "margins_inches": {name: _inches(getattr(section, f"{name}_margin")) for name in MARGINS},
    }


def set_margins(section: Any, margins: dict[str, float | None]) -> None:
    for name, value in margins.items():
        if value is None:
            continue
        if not 0 <= value <= 10:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{name}: margin must be between 0 and 10 inches, got {value}",
                argument=name,
            )
        setattr(section, f"{name}_margin", _shared.Inches(value))


def apply_orientation(section: Any, orientation: str) -> None:
    if orientation not in ("portrait", "landscape"):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"orientation: expected 'portrait' or 'landscape', got {orientation!r}",
            argument="orientation",
        )
    set_orientation(section, orientation)


def read_header_footer(index: int, section: Any, area: str) -> dict[str, Any]:
    part = section.header if area == "header" else section.footer
    linked = part.is_linked_to_previous
    element = part._element
    paragraphs = [
        {"id": f"{area}.s.{index}.p.{k}", "text": paragraph_text(p)}
        for k, p in enumerate(paragraphs_of(element))
    ]
    tables = sum(1 for el in block_elements(element) if el.tag != W_P)
    return {
        "section_index": index,
        "area": area,
        "linked_to_previous": linked,
        "text": "\n".join(p["text"] for p in paragraphs),
        "paragraphs": paragraphs,
        "tables": tables,
    }


def write_header_footer(
    section: Any, area: str, text: str, *, document: Any = None, blocks: list[Any] | None = None
) -> None:
    """Set the header/footer of one section (its own definition, unlinked from the previous
    section): ``text`` reuses the formatting of its existing paragraphs; ``blocks`` replace
    its content with content blocks (no images: they would need the header's own part)."""
    part = section.header if area == "header" else section.footer
    part.is_linked_to_previous = False
    container = part._element
    if not blocks:
        _set_cell_text(container, text)
        return
    from mcp_servers.documents.blocks import build_blocks

    if any(block.type in ("image", "section_break", "page_break") for block in blocks):
        raise ToolError(
            ErrorCode.unsupported,
            "content: headers and footers take paragraphs, headings, lists and tables only",
            argument="content",
        )

    def no_images(value: str, where: str) -> Any:
        raise ToolError(
            ErrorCode.unsupported, f"{where}: images are not supported in headers", argument="content"
        )

    elements = build_blocks(document, blocks, no_images)
    for child in list(block_elements(container)):
        child.getparent().remove(child)
    for element in elements:
        container.append(element)


def link_header_footer(section: Any, area: str, linked: bool) -> None:
    part = section.header if area == "header" else section.footer
    part.is_linked_to_previous = linked
