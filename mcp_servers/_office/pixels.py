"""Pixel operations on embedded pictures (rotate, flip, brightness, contrast, crop).

Shared by the documents and presentations servers' ``modify_image``. The result is a new
image (PNG, or JPEG when the source was JPEG); the caller stores it as a new image part,
so other pictures sharing the old part are not changed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Annotated, TypeVar

from pydantic import Field

from atoll.errors import ErrorCode
from mcp_servers._core.errors import ToolError

OPERATIONS = ("rotate", "flip", "brightness", "contrast", "crop")
#: Largest picture decoded (pixels), against decompression bombs.
MAX_PIXELS = 40_000_000

# The arguments of both servers' modify_image that fill a PixelEdit, declared once so the
# two tools show agents the same operations and limits.
PixelOperation = Annotated[
    str | None, Field(description="rotate | flip | brightness | contrast | crop (pixel edits)")
]
Rotation = Annotated[int | None, Field(ge=-360, le=360, description="degrees clockwise")]
FlipAxis = Annotated[str | None, Field(description="horizontal | vertical")]
Factor = Annotated[float | None, Field(ge=0, le=10, description="factor, 1.0 = unchanged")]
CropEdge = Annotated[int | None, Field(ge=0)]


@dataclass
class PixelEdit:
    """What to do; only the fields of ``operation`` are used."""

    operation: str
    rotation: int | None = None
    flip: str | None = None
    brightness: float | None = None
    contrast: float | None = None
    crop_left: int | None = None
    crop_top: int | None = None
    crop_right: int | None = None
    crop_bottom: int | None = None


Given = TypeVar("Given")


def _need(value: Given | None, name: str, operation: str) -> Given:
    """``value``; ToolError when the operation needs it and it was left out."""
    if value is None:
        raise ToolError(
            ErrorCode.invalid_argument, f"{name}: required for operation={operation!r}", argument=name
        )
    return value


def apply(blob: bytes, edit: PixelEdit) -> tuple[bytes, str, tuple[int, int]]:
    """(new image bytes, file extension, (width, height) in pixels).

    Raises ToolError ``invalid_argument`` for an unknown operation or a missing/out of
    range value, ``unsupported`` for image data Pillow cannot decode.
    """
    from PIL import Image, ImageEnhance, ImageOps

    if edit.operation not in OPERATIONS:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"operation: expected one of {', '.join(OPERATIONS)}, got {edit.operation!r}",
            argument="operation",
        )
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        opened = Image.open(io.BytesIO(blob))
        opened.load()
    except Exception as exc:
        raise ToolError(
            ErrorCode.unsupported,
            f"the picture cannot be decoded for {edit.operation} ({type(exc).__name__})",
        ) from exc
    source_format = (opened.format or "PNG").upper()
    image: Image.Image = opened
    if edit.operation == "rotate":
        rotation = _need(edit.rotation, "rotation", "rotate")
        # Clockwise, as in Office; expand so nothing is cut off.
        image = image.rotate(-(rotation % 360), expand=True)
    elif edit.operation == "flip":
        _need(edit.flip, "flip", "flip")
        if edit.flip not in ("horizontal", "vertical"):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"flip: expected horizontal or vertical, got {edit.flip!r}",
                argument="flip",
            )
        image = ImageOps.mirror(image) if edit.flip == "horizontal" else ImageOps.flip(image)
    elif edit.operation in ("brightness", "contrast"):
        factor = _need(
            edit.brightness if edit.operation == "brightness" else edit.contrast,
            edit.operation,
            edit.operation,
        )
        if not 0 <= factor <= 10:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{edit.operation}: factor must be between 0 and 10",
                argument=edit.operation,
            )
        if image.mode not in ("RGB", "RGBA", "L"):
            image = image.convert("RGBA")
        enhancer = (
            ImageEnhance.Brightness(image) if edit.operation == "brightness" else ImageEnhance.Contrast(image)
        )
        image = enhancer.enhance(factor)
    else:
        left, top, right, bottom = (
            _need(edit.crop_left, "crop_left", "crop"),
            _need(edit.crop_top, "crop_top", "crop"),
            _need(edit.crop_right, "crop_right", "crop"),
            _need(edit.crop_bottom, "crop_bottom", "crop"),
        )
        if not (0 <= left < right <= image.width and 0 <= top < bottom <= image.height):
            raise ToolError(
                ErrorCode.invalid_argument,
                f"crop: box ({left}, {top}, {right}, {bottom}) must lie inside the {image.width}x{image.height} picture",
                argument="crop_left",
            )
        image = image.crop((left, top, right, bottom))
    buffer = io.BytesIO()
    if source_format == "JPEG" and image.mode in ("RGB", "L"):
        image.save(buffer, format="JPEG", quality=92)
        extension = "jpg"
    else:
        image.save(buffer, format="PNG")
        extension = "png"
    return buffer.getvalue(), extension, image.size
