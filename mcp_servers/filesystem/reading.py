"""Reading tools: read_text_file (byte or line ranges, size cap) and read_image_file."""

from __future__ import annotations

import codecs
import os
from typing import Annotated, Any

from pydantic import BaseModel, Field

from atoll.errors import AtollError, ErrorCode
from mcp_servers._core import ImageBlock, ServerContext, ToolError, ToolOutput
from mcp_servers.filesystem.images import MAX_FILE_BYTES, image_size, prepare_for_model, sniff_image
from mcp_servers.filesystem.server import SERVER

DEFAULT_MAX_BYTES = 100_000
MAX_MAX_BYTES = 1_000_000
# Files in a wide encoding are decoded whole for line ranges; beyond this, use byte ranges.
MAX_WIDE_FILE_BYTES = 20 * 1024 * 1024
_WIDE = ("utf-16", "utf-32")


class TextFile(BaseModel):
    path: str
    content: str
    encoding: str
    size: int
    truncated: bool
    byte_offset: int | None = None
    bytes_read: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    total_lines: int | None = None
    next: dict[str, Any] | None = None

    def render_text(self) -> str:
        if not self.truncated or self.next is None:
            return self.content
        more = ", ".join(f"{key}={value!r}" for key, value in self.next.items())
        shown = (
            f"lines {self.start_line}-{self.end_line} of {self.total_lines}"
            if self.start_line is not None
            else f"bytes {self.byte_offset}-{(self.byte_offset or 0) + (self.bytes_read or 0)} of {self.size}"
        )
        return f"{self.content}\n\n[truncated: showing {shown}; continue with read_text_file(file_path={self.path!r}, {more})]"


def _bom_encoding(head: bytes) -> str | None:
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return None


def _check_encoding(encoding: str) -> str:
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ToolError(
            ErrorCode.invalid_argument, f"encoding: unknown encoding {encoding!r}", argument="encoding"
        ) from None


def _decode(data: bytes, encoding: str, *, final: bool, strict: bool = False) -> tuple[str, int]:
    """Decode, keeping an incomplete trailing character for the next read; (text, bytes used)."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict" if strict else "replace")
    text = decoder.decode(data, final=final)
    pending = len(decoder.getstate()[0])
    return text, len(data) - pending


def _decode_auto(data: bytes, head: bytes, requested: str, *, final: bool) -> tuple[str, int, str]:
    """(text, bytes used, encoding name) using ``requested`` or, for "auto", BOM / UTF-8 / cp1252."""
    if requested != "auto":
        encoding = _check_encoding(requested)
        text, used = _decode(data, encoding, final=final)
        return text, used, encoding
    bom = _bom_encoding(head)
    if bom:
        text, used = _decode(data, bom, final=final)
        return text, used, bom
    try:
        text, used = _decode(data, "utf-8", final=final, strict=True)
        return text, used, "utf-8"
    except UnicodeDecodeError:
        text, used = _decode(data, "cp1252", final=final)
        return text, used, "cp1252"


def _looks_binary(sample: bytes, encoding: str) -> bool:
    return b"\x00" in sample and not any(w in encoding for w in _WIDE)


def _binary_error(virtual: str) -> ToolError:
    return ToolError(
        ErrorCode.unsupported,
        f"file_path: {virtual} is a binary file; use read_image_file for images or the "
        "documents/spreadsheets/pdfs/presentations tools for office files",
        argument="file_path",
    )


@SERVER.tool(action="read_text", read_only=True)
def read_text_file(
    ctx: ServerContext,
    file_path: str,
    encoding: str = "auto",
    byte_offset: Annotated[int, Field(ge=0)] = 0,
    max_bytes: Annotated[int, Field(ge=1, le=MAX_MAX_BYTES)] = DEFAULT_MAX_BYTES,
    start_line: Annotated[int | None, Field(ge=1)] = None,
    end_line: Annotated[int | None, Field(ge=1)] = None,
) -> TextFile:
    """Read a text file (at most max_bytes per call; a truncated result says how to continue).

    Read a byte range with byte_offset, or a line range with start_line/end_line (1-based,
    inclusive). Encoding "auto" detects a BOM, else UTF-8, else Windows-1252.

    Args:
        file_path: file to read, e.g. "/notes/todo.txt".
        encoding: text encoding ("auto", "utf-8", "latin-1", "utf-16", ...).
        byte_offset: first byte to read (byte-range mode).
        max_bytes: most bytes of the file to return in one call (1-1000000).
        start_line: first line to read (line-range mode).
        end_line: last line to read (line-range mode; default: as many as fit in max_bytes).
    """
    target = ctx.files.at(file_path, argument="file_path", allow_root=False)
    virtual = target.virtual
    if end_line is not None and start_line is not None and end_line < start_line:
        raise ToolError(ErrorCode.invalid_argument, "end_line: must be >= start_line", argument="end_line")
    with target.open() as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(4096)
        detected = encoding if encoding != "auto" else (_bom_encoding(head) or "utf-8")
        if _looks_binary(head, detected):
            raise _binary_error(virtual)
        if start_line is not None or end_line is not None:
            return _read_lines(handle, head, virtual, size, encoding, start_line or 1, end_line, max_bytes)
        return _read_bytes(handle, head, virtual, size, encoding, byte_offset, max_bytes)


def _read_bytes(
    handle, head: bytes, virtual: str, size: int, encoding: str, offset: int, max_bytes: int
) -> TextFile:
    if offset > size:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"byte_offset: {offset} is past the end of the file ({size} bytes)",
            argument="byte_offset",
        )
    handle.seek(offset)
    data = handle.read(max_bytes)
    if _looks_binary(data, encoding if encoding != "auto" else (_bom_encoding(head) or "utf-8")):
        raise _binary_error(virtual)
    if offset and encoding in ("auto", "utf-8", "utf8") and not _bom_encoding(head):
        skip = 0  # started inside a UTF-8 character: move to the next character boundary
        while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
            skip += 1
        data, offset = data[skip:], offset + skip
    at_end = offset + len(data) >= size
    text, used, used_encoding = _decode_auto(data, head, encoding, final=at_end)
    if offset == 0 and used_encoding == "utf-8-sig":
        used_encoding = "utf-8-sig"
    end = offset + used
    truncated = end < size
    return TextFile(
        path=virtual,
        content=text,
        encoding=used_encoding,
        size=size,
        truncated=truncated,
        byte_offset=offset,
        bytes_read=used,
        next={"byte_offset": end, "max_bytes": max_bytes} if truncated else None,
    )


def _read_lines(
    handle, head: bytes, virtual: str, size: int, encoding: str, start: int, end: int | None, max_bytes: int
) -> TextFile:
    chosen = encoding if encoding != "auto" else (_bom_encoding(head) or "auto")
    if any(w in _check_encoding(chosen) if chosen != "auto" else False for w in _WIDE):
        return _read_wide_lines(handle, virtual, size, chosen, start, end, max_bytes)
    handle.seek(0)
    collected: list[bytes] = []
    total = 0
    position = 0
    next_args: dict[str, Any] | None = None
    last_line = start - 1
    for number, line in enumerate(handle, 1):
        line_start = position
        position += len(line)
        if number < start:
            continue
        if end is not None and number > end:
            break
        if total + len(line) > max_bytes:
            if collected:
                next_args = {"start_line": number} | ({"end_line": end} if end else {})
            else:  # one line longer than max_bytes: give its start, continue by bytes
                collected.append(line[:max_bytes])
                last_line = number
                next_args = {"byte_offset": line_start + max_bytes}
            break
        collected.append(line)
        total += len(line)
        last_line = number
    total_lines = _count_lines(handle, size)
    if start > total_lines and (size or start > 1):
        raise ToolError(
            ErrorCode.invalid_argument,
            f"start_line: {start} is past the last line ({total_lines})",
            argument="start_line",
        )
    data = b"".join(collected)
    text, _, used_encoding = _decode_auto(data, head, encoding, final=True)
    if text.startswith("\ufeff"):
        text = text[1:]
    return TextFile(
        path=virtual,
        content=text,
        encoding=used_encoding,
        size=size,
        truncated=next_args is not None,
        start_line=start,
        end_line=max(last_line, start - 1),
        total_lines=total_lines,
        next=next_args,
    )


def _count_lines(handle, size: int) -> int:
    handle.seek(0)
    count = 0
    last = b""
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (1 if size and last != b"\n" else 0)


def _read_wide_lines(
    handle, virtual: str, size: int, encoding: str, start: int, end: int | None, max_bytes: int
) -> TextFile:
    if size > MAX_WIDE_FILE_BYTES:
        raise ToolError(
            ErrorCode.too_large,
            f"file_path: {virtual} is too large for line ranges in {encoding}; use byte_offset",
            argument="file_path",
        )
    handle.seek(0)
    lines = handle.read().decode(encoding, errors="replace").splitlines(keepends=True)
    chosen: list[str] = []
    total = 0
    last = start - 1
    next_args = None
    for number in range(start, (end or len(lines)) + 1):
        if number > len(lines):
            break
        cost = len(lines[number - 1].encode(encoding))
        if total + cost > max_bytes and chosen:
            next_args = {"start_line": number} | ({"end_line": end} if end else {})
            break
        chosen.append(lines[number - 1])
        total += cost
        last = number
    return TextFile(
        path=virtual,
        content="".join(chosen),
        encoding=encoding,
        size=size,
        truncated=next_args is not None,
        start_line=start,
        end_line=last,
        total_lines=len(lines),
        next=next_args,
    )


class ImageInfo(BaseModel):
    path: str
    mime_type: str
    size: int
    width: int | None = None
    height: int | None = None
    sent_mime_type: str
    downscaled: bool


@SERVER.tool(action="read_image", read_only=True)
def read_image_file(ctx: ServerContext, file_path: str) -> ToolOutput[ImageInfo]:
    """Return an image file (PNG, JPEG, GIF, WebP, BMP, TIFF) as image content the model can see.

    Large images are downscaled (longest side 2048 px) before sending.

    Args:
        file_path: image file, e.g. "/photos/chart.png".
    """
    target = ctx.files.at(file_path, argument="file_path", allow_root=False)
    virtual = target.virtual
    with target.open() as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise ToolError(
                ErrorCode.too_large,
                f"file_path: {virtual} is {size} bytes (limit {MAX_FILE_BYTES})",
                argument="file_path",
            )
        data = handle.read()
    mime = sniff_image(data[:16])
    if mime is None:
        kind = (
            "an SVG drawing (text; use read_text_file)"
            if data.lstrip()[:5] in (b"<svg ", b"<?xml")
            else "not a supported image"
        )
        raise ToolError(ErrorCode.unsupported, f"file_path: {virtual} is {kind}", argument="file_path")
    try:
        sent, sent_mime, downscaled = prepare_for_model(data, mime)
    except AtollError as exc:  # a reading bound (atoll.formats.bounds.InputTooLarge)
        raise ToolError(exc.code, f"file_path: {virtual} {exc.message}", argument="file_path") from None
    except Exception as exc:
        raise ToolError(
            ErrorCode.bad_data, f"file_path: {virtual} is a damaged {mime} file ({exc})", argument="file_path"
        ) from None
    width, height = image_size(data)
    info = ImageInfo(
        path=virtual,
        mime_type=mime,
        size=size,
        width=width,
        height=height,
        sent_mime_type=sent_mime,
        downscaled=downscaled,
    )
    dims = f"{width}x{height} " if width else ""
    note = " (downscaled for sending)" if downscaled else ""
    return ToolOutput(
        data=info, text=f"{virtual}: {dims}{mime}, {size} bytes{note}", images=[ImageBlock(sent, sent_mime)]
    )
