"""Duplicating a slide with everything it refers to.

python-pptx has no slide copy. Copying the shape tree alone leaves pictures and charts
pointing at relationship ids the new slide does not have (the reference's defect: the
copy shows broken images). Here every relationship of the source slide is recreated on
the copy and the ids inside the copied XML are remapped: pictures and media share the
image part (as PowerPoint does), charts get their own copy of the chart part and its
embedded workbook (editing one chart's data must not change the other), hyperlinks are
re-added as external relationships. Notes are copied as text.
"""

from __future__ import annotations

import copy
from typing import Any

from atoll._lazy import lazy_module

# python-pptx is imported on the first copy, not when the server is built.
_constants = lazy_module("pptx.opc.constants")
_chart = lazy_module("pptx.parts.chart")
_embedded = lazy_module("pptx.parts.embeddedpackage")

_R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
#: RELATIONSHIP_TYPE.SLIDE_LAYOUT and .NOTES_SLIDE, spelled out (tests/mcp_servers/test_presentations.py
#: checks them against python-pptx)
_SKIP = {f"{_R_NS}/slideLayout", f"{_R_NS}/notesSlide"}


def _copy_chart_part(chart_part: Any, package: Any) -> Any:
    clone = _chart.ChartPart.load(
        package.next_partname(_chart.ChartPart.partname_template),
        chart_part.content_type,
        package,
        chart_part.blob,
    )
    mapping: dict[str, str] = {}
    for rel_id, rel in list(chart_part.rels.items()):
        if rel.is_external:
            mapping[rel_id] = clone.relate_to(rel.target_ref, rel.reltype, is_external=True)
        elif rel.reltype == _constants.RELATIONSHIP_TYPE.PACKAGE:
            workbook = _embedded.EmbeddedXlsxPart.new(rel.target_part.blob, package)
            mapping[rel_id] = clone.relate_to(workbook, rel.reltype)
        else:
            mapping[rel_id] = clone.relate_to(rel.target_part, rel.reltype)
    _remap(clone._element, mapping)
    return clone


def _remap(root: Any, mapping: dict[str, str]) -> None:
    """Rewrite every r:* attribute (r:embed, r:link, r:id, ...) through ``mapping``."""
    prefix = "{" + _R_NS + "}"
    for element in root.iter():
        for name, value in element.attrib.items():
            if name.startswith(prefix) and value in mapping:
                element.set(name, mapping[value])


def clone_slide(deck: Any, source: Any) -> Any:
    """Append a copy of ``source`` to ``deck`` and return it."""
    target = deck.slides.add_slide(source.slide_layout)
    tree = target.shapes._spTree
    for shape in list(tree):
        if shape.tag.endswith(("}sp", "}grpSp", "}graphicFrame", "}pic", "}cxnSp")):
            tree.remove(shape)
    for child in source.shapes._spTree:
        if child.tag.endswith(("}nvGrpSpPr", "}grpSpPr")):
            continue
        tree.append(copy.deepcopy(child))
    # Slide background and colour-map override live outside the shape tree.
    source_csld = source._element.cSld
    background = source_csld.find("{http://schemas.openxmlformats.org/presentationml/2006/main}bg")
    if background is not None:
        target._element.cSld.insert(0, copy.deepcopy(background))
    package = deck.part.package
    mapping: dict[str, str] = {}
    for rel_id, rel in list(source.part.rels.items()):
        if rel.reltype in _SKIP:
            continue
        if rel.is_external:
            mapping[rel_id] = target.part.relate_to(rel.target_ref, rel.reltype, is_external=True)
        elif rel.reltype == _constants.RELATIONSHIP_TYPE.CHART:
            mapping[rel_id] = target.part.relate_to(_copy_chart_part(rel.target_part, package), rel.reltype)
        else:
            mapping[rel_id] = target.part.relate_to(rel.target_part, rel.reltype)
    _remap(target._element, mapping)
    if source.has_notes_slide:
        notes = source.notes_slide.notes_text_frame
        if notes is not None and notes.text:
            target.notes_slide.notes_text_frame.text = notes.text
    return target
