"""Pictures in the body: find them by annotation, read their bytes, add, resize, replace."""

from __future__ import annotations

from typing import Any, BinaryIO

from atoll.errors import ErrorCode
from atoll.formats.docx.names import qn
from atoll.formats.docx.reading import A_BLIP, R_EMBED, ImageRef, collect_images
from mcp_servers._core.errors import ToolError

_EMU_PER_INCH = 914400
#: Largest image returned by read_image (bytes).
MAX_IMAGE_BYTES = 10 * 1024 * 1024


def find_image(document: Any, annotation: object) -> ImageRef:
    """The image called ``annotation``: ``image.N`` (as reads show it), ``N``, the run
    identifier holding it (``body.p.3.r.0``), its paragraph (first image) or its
    relationship id (``rId7``). ToolError ``not_found`` lists how many images exist."""
    images = collect_images(document)
    key = str(annotation).strip()
    if key.isdigit():
        key = f"image.{key}"
    for image in images:
        if key in (image.annotation, f"{image.paragraph_id}.r.{image.run_index}", image.rel_id):
            return image
    for image in images:
        if key == image.paragraph_id:
            return image
    known = ", ".join(image.annotation for image in images[:20]) or "none"
    raise ToolError(
        ErrorCode.not_found,
        f"annotation: no image {str(annotation)!r} in the document (images: {known})",
        argument="annotation",
    )


def image_bytes(document: Any, image: ImageRef) -> tuple[bytes, str]:
    """(bytes, MIME type) of an embedded image."""
    if not image.rel_id or image.rel_id not in document.part.rels:
        raise ToolError(
            ErrorCode.not_found, f"annotation: {image.annotation} is a linked image with no embedded data"
        )
    part = document.part.related_parts[image.rel_id]
    data = part.blob
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError(
            ErrorCode.too_large,
            f"annotation: {image.annotation} is {len(data)} bytes (limit {MAX_IMAGE_BYTES})",
        )
    return data, part.content_type


def _set_extent(image: ImageRef, width_emu: int, height_emu: int) -> None:
    for extent in image.drawing.iter(qn("wp:extent")):
        extent.set("cx", str(width_emu))
        extent.set("cy", str(height_emu))
    for ext in image.drawing.iter(qn("a:ext")):
        if ext.getparent().tag == qn("a:xfrm"):
            ext.set("cx", str(width_emu))
            ext.set("cy", str(height_emu))


def resize(image: ImageRef, width_inches: float | None, height_inches: float | None) -> None:
    """Resize; with one dimension given the aspect ratio is kept."""
    width, height = image.width_emu, image.height_emu
    if width_inches is not None and height_inches is not None:
        width, height = int(width_inches * _EMU_PER_INCH), int(height_inches * _EMU_PER_INCH)
    elif width_inches is not None:
        new_width = int(width_inches * _EMU_PER_INCH)
        height = int(height * new_width / width) if width else new_width
        width = new_width
    elif height_inches is not None:
        new_height = int(height_inches * _EMU_PER_INCH)
        width = int(width * new_height / height) if height else new_height
        height = new_height
    _set_extent(image, width, height)
    image.width_emu, image.height_emu = width, height


def replace(document: Any, image: ImageRef, new_image: BinaryIO, shown: str) -> None:
    """Point the picture at a new image file, keeping its width (height follows the new
    image's aspect ratio)."""
    try:
        rel_id, picture = document.part.get_or_add_image(new_image)
    except Exception as exc:
        raise ToolError(
            ErrorCode.unsupported, f"image_path: {shown} is not a supported image file", argument="image_path"
        ) from exc
    blip = next(image.drawing.iter(A_BLIP), None)
    if blip is None:
        raise ToolError(
            ErrorCode.unsupported, f"annotation: {image.annotation} is not a picture that can be replaced"
        )
    blip.set(R_EMBED, rel_id)
    px_width, px_height = picture.px_width, picture.px_height
    if px_width and image.width_emu:
        _set_extent(image, image.width_emu, int(image.width_emu * px_height / px_width))


def replace_pixels(document: Any, image: ImageRef, edit: Any) -> None:
    """Apply a pixel edit (see :mod:`pixels`) as a new image part; the displayed width is
    kept and the height follows the new aspect ratio (a 90° turn swaps it)."""
    import io

    from mcp_servers._office.pixels import apply

    data, _mime = image_bytes(document, image)
    new_data, _extension, (px_width, px_height) = apply(data, edit)
    rel_id, _picture = document.part.get_or_add_image(io.BytesIO(new_data))
    blip = next(image.drawing.iter(A_BLIP), None)
    if blip is None:
        raise ToolError(
            ErrorCode.unsupported, f"annotation: {image.annotation} is not a picture that can be edited"
        )
    blip.set(R_EMBED, rel_id)
    image.rel_id = rel_id
    if px_width and image.width_emu:
        _set_extent(image, image.width_emu, int(image.width_emu * px_height / px_width))


def set_description(image: ImageRef, text: str) -> None:
    for doc_pr in image.drawing.iter(qn("wp:docPr")):
        doc_pr.set("descr", text)
