"""Bounds on reading PDFs: every stream a decoder amplifies is decoded with its output counted.

Part of the reading bounds of :mod:`atoll.formats.bounds` (its limits, its error, its memory
of versions that passed); docs/security.md, "Office, PDF and XML bombs".
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable
from typing import Any

from atoll.formats import bounds
from atoll.formats.bounds import InputTooLarge

_CHUNK = 1 << 20

_FLATE = ("/FlateDecode", "/Fl")
_LZW = ("/LZWDecode", "/LZW")
_RUN_LENGTH = ("/RunLengthDecode", "/RL")


def check_pdf(document: Any, name: str, key: Hashable | None = None) -> None:
    """Refuse the open pymupdf ``document`` (the file ``name``) before its pages are read.

    Every stream that a decoder amplifies (Flate, LZW, RunLength, in any chain) is decoded
    with its output counted and cut at the limit, never held whole beyond it; images are
    checked by their declared dimensions (they are decoded only when a page is rendered).
    ``key`` (a content hash, or a file's identity and stamp) remembers a document that
    passed, so a warm tool call does not scan again. Raises :class:`InputTooLarge`.
    """
    if bounds.remembered(key):
        return
    bound = bounds.LIMITS
    objects = document.xref_length()
    if objects > bound.max_pdf_objects:
        raise InputTooLarge(f"{name}: has {objects} objects (limit {bound.max_pdf_objects})")
    total = 0
    for xref in range(1, objects):
        if not document.xref_is_stream(xref):
            continue
        if document.xref_get_key(xref, "Subtype")[1] == "/Image":
            width, height = _integer(document, xref, "Width"), _integer(document, xref, "Height")
            if width * height > bound.max_pdf_image_pixels:
                raise InputTooLarge(
                    f"{name}: object {xref} is a {width}x{height} image "
                    f"(limit {bound.max_pdf_image_pixels} pixels)"
                )
            continue
        filters = _filters(document.xref_get_key(xref, "Filter"))
        if not any(f in _FLATE + _LZW + _RUN_LENGTH for f in filters):
            continue
        size = _decoded_size(document.xref_stream_raw(xref), filters, bound.max_pdf_stream_bytes)
        if size > bound.max_pdf_stream_bytes:
            raise InputTooLarge(
                f"{name}: stream {xref} decodes to more than {bound.max_pdf_stream_bytes} bytes "
                f"(limit {bound.max_pdf_stream_bytes} per stream)"
            )
        total += size
        if total > bound.max_pdf_unpacked_bytes:
            raise InputTooLarge(
                f"{name}: its streams decode to more than {bound.max_pdf_unpacked_bytes} bytes "
                f"(limit {bound.max_pdf_unpacked_bytes} per file)"
            )
    bounds.remember(key)


def _integer(document: Any, xref: int, key: str) -> int:
    """An integer entry of a stream's dictionary, direct or indirect (0 when unreadable)."""
    kind, value = document.xref_get_key(xref, key)
    if kind == "xref":  # "12 0 R"
        value = document.xref_object(int(value.split()[0]), compressed=True)
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _filters(entry: tuple[str, str]) -> list[str]:
    kind, value = entry
    if kind == "name":
        return [value]
    if kind == "array":
        return [part for part in value.strip("[]").replace("/", " /").split() if part.startswith("/")]
    return []


def _decoded_size(raw: bytes, filters: list[str], limit: int) -> int:
    """Bytes the filter chain produces from ``raw``, counted up to just past ``limit``; every
    stage runs for real (the amplifying ones cut at ``limit``) up to the last amplifying one."""
    from pypdf.errors import LimitReachedError, PdfStreamError
    from pypdf.filters import ASCII85Decode, ASCIIHexDecode, RunLengthDecode

    last = max(i for i, name in enumerate(filters) if name in _FLATE + _LZW + _RUN_LENGTH)
    data = raw
    try:
        for index, name in enumerate(filters[: last + 1]):
            keep = index < last
            if name in _FLATE:
                data, size = _inflate(data, limit, keep=keep)
                if size > limit or not keep:
                    return size
            elif name in _LZW:
                from pypdf._codecs._codecs import LzwCodec

                data = LzwCodec(max_output_length=limit).decode(data)
            elif name in _RUN_LENGTH:
                size = _run_length_size(data, limit)
                if size > limit or not keep:
                    return size
                data = RunLengthDecode.decode(data)
            elif name in ("/ASCIIHexDecode", "/AHx"):
                data = ASCIIHexDecode.decode(data)
            elif name in ("/ASCII85Decode", "/A85"):
                data = ASCII85Decode.decode(data)
            else:
                return len(data)  # an image codec or an unknown filter: mupdf does not amplify it
    except LimitReachedError:
        return limit + 1
    except (PdfStreamError, ValueError):
        return len(data)  # a broken stream: mupdf reports it (or reads what it can)
    return len(data)


def _inflate(data: bytes, limit: int, *, keep: bool) -> tuple[bytes, int]:
    """(output if ``keep``, its size) of zlib-inflating ``data``, stopped past ``limit``."""
    inflater = zlib.decompressobj()
    kept: list[bytes] = []
    size = 0
    pending = data
    while pending and not inflater.eof:
        try:
            chunk = inflater.decompress(pending, _CHUNK)
        except zlib.error:  # damaged data: mupdf stops where zlib does
            break
        pending = inflater.unconsumed_tail
        size += len(chunk)
        if size > limit:
            return b"", size
        if keep:
            kept.append(chunk)
        if not chunk and not pending:
            break
    return b"".join(kept), size


def _run_length_size(data: bytes, limit: int) -> int:
    """Output length of RunLengthDecode over ``data`` without producing it."""
    if len(data) * 128 <= limit:
        return len(data) * 128 // 2  # cannot reach the limit; an estimate is enough
    size = index = 0
    while index < len(data) and size <= limit:
        length = data[index]
        if length == 128:
            break
        if length < 128:
            size += length + 1
            index += length + 2
        else:
            size += 257 - length
            index += 2
    return size
