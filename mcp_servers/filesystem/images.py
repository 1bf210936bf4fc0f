"""Image files: type detection from content, size, and downscaling for model inputs."""

from __future__ import annotations

import io
from typing import BinaryIO

# Model providers refuse larger image inputs; bigger files are downscaled before sending.
MAX_SEND_BYTES = 4 * 1024 * 1024
MAX_SEND_SIDE = 2048
MAX_FILE_BYTES = 50 * 1024 * 1024

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)


def sniff_image(head: bytes) -> str | None:
    """The image MIME type from the first bytes, or None when it is not a known image."""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_size(source: BinaryIO | bytes) -> tuple[int | None, int | None]:
    """(width, height) of an image given as an open file or bytes, or (None, None) when it
    cannot be read."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            return image.size
    except Exception:
        return None, None


def prepare_for_model(data: bytes, mime: str) -> tuple[bytes, str, bool]:
    """Bytes to send as MCP image content: the original, or a downscaled JPEG/PNG when too big.

    Returns (bytes, mime, downscaled). TIFF and BMP are converted to PNG (models accept
    PNG, JPEG, GIF and WebP). Raises :class:`atoll.formats.bounds.InputTooLarge` before
    decoding an image of more than ``max_image_pixels`` (a few KiB of PNG or TIFF can
    declare a 20,000 x 20,000 canvas: 1.6 GB decoded).
    """
    convert = mime in ("image/tiff", "image/bmp")
    if len(data) <= MAX_SEND_BYTES and not convert:
        return data, mime, False
    from PIL import Image

    from atoll.formats import bounds

    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        if width * height > bounds.LIMITS.max_image_pixels:
            raise bounds.InputTooLarge(
                f"is a {width}x{height} image (limit {bounds.LIMITS.max_image_pixels} pixels)"
            )
        image.load()
        resized = max(image.size) > MAX_SEND_SIDE
        if resized:
            image.thumbnail((MAX_SEND_SIDE, MAX_SEND_SIDE))
        out = io.BytesIO()
        if image.mode in ("RGBA", "LA", "P") or mime == "image/png":
            image.save(out, format="PNG", optimize=True)
            result, result_mime = out.getvalue(), "image/png"
        else:
            image.convert("RGB").save(out, format="JPEG", quality=85)
            result, result_mime = out.getvalue(), "image/jpeg"
        if len(result) > MAX_SEND_BYTES:
            out = io.BytesIO()
            image.convert("RGB").save(out, format="JPEG", quality=70)
            result, result_mime = out.getvalue(), "image/jpeg"
    return result, result_mime, resized or result_mime != mime
