"""Reading decks: shapes in order (groups looked through), text as markdown, tables,
charts with their data, pictures numbered ``slide.{i}.image.{k}``, speaker notes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _shape_types() -> Any:
    """``pptx.enum.shapes`` (python-pptx is imported on the first read, not with this module)."""
    from pptx.enum import shapes

    return shapes


_EMU_PER_INCH = 914400
# PP_PLACEHOLDER values as ints, so that importing this does not import python-pptx (tests
# check them against the enum).
#: PP_PLACEHOLDER.TITLE, CENTER_TITLE, VERTICAL_TITLE
TITLE_TYPES = (1, 3, 5)
_TITLES = TITLE_TYPES
#: PP_PLACEHOLDER.DATE, FOOTER, SLIDE_NUMBER
CHROME_TYPES = (16, 15, 13)
_CHROME = CHROME_TYPES


def inches(value: Any) -> float | None:
    return None if value is None else round(int(value) / _EMU_PER_INCH, 2)


def iter_shapes(shapes: Any) -> Iterator[Any]:
    """Every shape in z-order, the members of groups included (after the group)."""
    for shape in shapes:
        yield shape
        if shape.shape_type == _shape_types().MSO_SHAPE_TYPE.GROUP:
            yield from iter_shapes(shape.shapes)


def is_picture(shape: Any) -> bool:
    if shape.shape_type == _shape_types().MSO_SHAPE_TYPE.PICTURE:
        return True
    return bool(getattr(shape, "is_placeholder", False) and hasattr(shape, "image") and _has_image(shape))


def _has_image(shape: Any) -> bool:
    try:
        shape.image  # noqa: B018 - raises for an empty picture placeholder
        return True
    except Exception:
        return False


def pictures(slide: Any, slide_index: int) -> list[tuple[str, Any]]:
    """(annotation, shape) of every picture on the slide."""
    found = [shape for shape in iter_shapes(slide.shapes) if is_picture(shape)]
    return [(f"slide.{slide_index}.image.{k}", shape) for k, shape in enumerate(found)]


def _paragraph_lines(text_frame: Any) -> list[dict[str, Any]]:
    return [
        {"text": "".join(run.text for run in p.runs) if p.runs else p.text, "level": p.level}
        for p in text_frame.paragraphs
    ]


def chart_summary(chart: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {"chart_type": str(chart.chart_type).split(" ")[0].split(".")[-1].lower()}
    try:
        summary["title"] = chart.chart_title.text_frame.text if chart.has_title else ""
    except Exception:
        summary["title"] = ""
    try:
        plot = chart.plots[0]
        summary["categories"] = [str(c) for c in plot.categories]
        summary["series"] = [
            {"name": s.name, "values": list(s.values)} for p in chart.plots for s in p.series
        ]
    except Exception:
        summary["categories"], summary["series"] = [], []
    return summary


def _geometry(shape: Any, cache: dict[Any, tuple[Any, ...]]) -> tuple[Any, ...]:
    """(left, top, width, height) in EMU. A placeholder without its own position inherits
    the layout's; that lookup is slow in python-pptx, so it is cached per layout placeholder."""
    xfrm = getattr(shape._element, "xfrm", None)
    if xfrm is not None and xfrm.off is not None and xfrm.ext is not None:
        return xfrm.off.x, xfrm.off.y, xfrm.ext.cx, xfrm.ext.cy
    key = None
    if getattr(shape, "is_placeholder", False):
        layout = shape.part.slide_layout if hasattr(shape.part, "slide_layout") else None
        key = (id(layout.part) if layout is not None else None, shape.placeholder_format.idx)
        if key in cache:
            return cache[key]
    value = (shape.left, shape.top, shape.width, shape.height)
    if key is not None:
        cache[key] = value
    return value


def shape_info(
    shape: Any, slide_index: int, picture_names: dict[int, str], index: int, cache: dict[Any, tuple[Any, ...]]
) -> dict[str, Any]:
    left, top, width, height = _geometry(shape, cache)
    info: dict[str, Any] = {
        "index": index,
        "shape_id": shape.shape_id,
        "name": shape.name,
        "left": inches(left),
        "top": inches(top),
        "width": inches(width),
        "height": inches(height),
    }
    if getattr(shape, "is_placeholder", False):
        kind = shape.placeholder_format.type
        info["placeholder"] = str(kind).split(" ")[0].lower()
        info["kind"] = "title" if kind in _TITLES else "placeholder"
    else:
        info["kind"] = "shape"
    if shape.has_text_frame:
        info["paragraphs"] = _paragraph_lines(shape.text_frame)
    if getattr(shape, "has_table", False) and shape.has_table:
        info["kind"] = "table"
        info["rows"] = [[cell.text for cell in row.cells] for row in shape.table.rows]
    elif getattr(shape, "has_chart", False) and shape.has_chart:
        info["kind"] = "chart"
        info["chart"] = chart_summary(shape.chart)
    elif id(shape._element) in picture_names:
        info["kind"] = "image"
        info["annotation"] = picture_names[id(shape._element)]
    elif shape.shape_type == _shape_types().MSO_SHAPE_TYPE.GROUP:
        info["kind"] = "group"
    return info


def slide_info(
    slide: Any, slide_index: int, cache: dict[Any, tuple[Any, ...]] | None = None
) -> dict[str, Any]:
    """Structured content of one slide (``cache``: inherited placeholder positions, shared
    across the slides of one read)."""
    cache = {} if cache is None else cache
    found = pictures(slide, slide_index)
    picture_names = {id(shape._element): name for name, shape in found}
    shapes = []
    title = ""
    for index, shape in enumerate(iter_shapes(slide.shapes)):
        if getattr(shape, "is_placeholder", False) and shape.placeholder_format.type in _CHROME:
            continue
        info = shape_info(shape, slide_index, picture_names, index, cache)
        if info["kind"] == "title" and not title:
            title = shape.text_frame.text
        shapes.append(info)
    notes = ""
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = slide.notes_slide.notes_text_frame.text
    return {
        "slide_index": slide_index,
        "layout": slide.slide_layout.name,
        "hidden": slide._element.get("show") in ("0", "false"),
        "title": title,
        "shapes": shapes,
        "notes": notes,
        "_keep": [shape for _name, shape in found],  # keeps lxml proxies (ids) alive; dropped below
    }


def public(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if not k.startswith("_")}


def render_slide(info: dict[str, Any]) -> str:
    """One slide as markdown."""
    hidden = ", hidden" if info.get("hidden") else ""
    lines = [f"## Slide {info['slide_index']} (layout: {info['layout']}{hidden})"]
    for shape in info["shapes"]:
        kind = shape["kind"]
        if kind == "title":
            lines.append(("# " + " / ".join(p["text"] for p in shape.get("paragraphs", []))).rstrip())
        elif kind == "table":
            rows = shape["rows"]
            lines.append(f'[table {len(rows)}x{len(rows[0]) if rows else 0} "{shape["name"]}"]')
            for r, row in enumerate(rows):
                lines.append(
                    "| " + " | ".join(cell.replace("\n", " / ").replace("|", "\\|") for cell in row) + " |"
                )
                if r == 0:
                    lines.append("|" + "---|" * len(row))
        elif kind == "chart":
            chart = shape["chart"]
            series = "; ".join(
                f"{s['name']}: {', '.join(_number(v) for v in s['values'])}" for s in chart["series"]
            )
            lines.append(
                f'[chart "{shape["name"]}" {chart["chart_type"]}'
                + (f' "{chart["title"]}"' if chart.get("title") else "")
                + f"] categories: {', '.join(chart['categories'])}; {series}"
            )
        elif kind == "image":
            lines.append(
                f'[image {shape["annotation"]} "{shape["name"]}" {shape["width"]}x{shape["height"]} in]'
            )
        elif shape.get("paragraphs"):
            texts = [p for p in shape["paragraphs"] if p["text"].strip()]
            if not texts:
                continue
            bulleted = shape.get("placeholder") in ("body", "object") or len(texts) > 1
            for paragraph in texts:
                indent = "  " * paragraph["level"]
                lines.append(f"{indent}- {paragraph['text']}" if bulleted else paragraph["text"])
    if info["notes"]:
        lines.append(f"Notes: {info['notes']}")
    return "\n".join(lines)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def deck_markdown(deck: Any) -> tuple[list[dict[str, Any]], str]:
    """(structured slides, markdown of the whole deck)."""
    infos = []
    cache: dict[Any, tuple[Any, ...]] = {}
    for index, slide in enumerate(deck.slides):
        info = slide_info(slide, index, cache)
        infos.append(info)
    text = "\n\n".join(render_slide(info) for info in infos)
    return [public(info) for info in infos], text
