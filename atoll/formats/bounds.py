"""Bounds on reading untrusted office, PDF and XML files (docs/security.md, "Office, PDF and XML bombs").

World files come from whoever built the world and from the agent; the app servers and the
grader read them with libraries that build everything in memory (python-docx, python-pptx,
openpyxl) or that cannot be interrupted (lxml, pymupdf). A few hundred KiB of zip can unpack
to gigabytes of XML, so every reader is bounded *before* the expensive work:

- :func:`check_package` inflates each member of an Office package once, counting the real
  bytes (a member whose header understates its size fails its CRC check when the declared
  size is reached), and refuses too many parts, too many unpacked bytes, XML parts that are
  too large or hold too many tags (``<``, a cheap upper bound on elements), and any document
  type declaration (the only way to declare entities: billion laughs, quadratic blowup).
  Office Open XML forbids DTDs (ECMA-376 Part 2, M1.17), so no real file is refused for it.
- :class:`MemberReader` is the same count for readers that stream members lazily.
- :data:`XML_PARSER_OPTIONS` are lxml's options for our own parsers: no entities, no DTD,
  no network, no ``huge_tree`` (libxml2's default caps: depth 256, 10 MB text nodes).
- The readers that walk everything (paragraphs, slides, rows, cells, pages) stop at the caps
  of :class:`ReadLimits`.

A bound is reported as :class:`InputTooLarge` (code ``too_large``): one line naming the
file and the limit. The MCP servers show it in their error style; the grader records it as
the file's extraction error.
"""

from __future__ import annotations

import dataclasses
import io
import os
import threading
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import IO, Any

from atoll.errors import CodedError


class InputTooLarge(CodedError):
    """A file crosses a reading bound (size, count, nesting, entity declaration); the
    message names the file and the limit."""

    code = "too_large"


@dataclass(frozen=True)
class ReadLimits:
    """How much of one file the readers process. Defaults keep one read under ~500 MiB
    of memory and a few seconds of CPU; ``ATOLL_READ_<FIELD>`` (upper case) overrides one
    for the process (e.g. ``ATOLL_READ_MAX_XML_TAGS=4000000``)."""

    #: Parts (zip members) in one Office package.
    max_members: int = 10_000
    #: All members of a package together, unpacked (counted while inflating).
    max_unpacked_bytes: int = 512 << 20
    #: One XML part, unpacked (a worksheet streamed by the xlsx reader included).
    max_xml_part_bytes: int = 128 << 20
    #: Tags (``<``) in the XML parts of a package that a library loads as one tree
    #: (python-docx, python-pptx, openpyxl): ~170 bytes of memory each once parsed.
    max_xml_tags: int = 2_000_000
    #: Paragraphs and table cells of a document body (~0.1 ms each to render).
    max_blocks: int = 40_000
    #: Slides of a deck rendered.
    max_slides: int = 2_000
    #: Rows walked in one read of a workbook, all sheets together (~8 µs each; Excel's own
    #: maximum per sheet is 1,048,576).
    max_sheet_rows: int = 1_048_576
    #: Rows of each sheet the grader extracts (and looks at for uncached formulas).
    max_extracted_rows: int = 100_000
    #: Entries of a workbook's shared-strings table.
    max_shared_strings: int = 1_000_000
    #: Pages of a PDF read in one extraction or tool call.
    max_pdf_pages: int = 2_000
    #: Objects in one PDF (each is looked at once by the stream scan).
    max_pdf_objects: int = 500_000
    #: One PDF stream other than an image, decoded (page contents take ~0.2 s per MiB to
    #: interpret, and cannot be interrupted).
    max_pdf_stream_bytes: int = 32 << 20
    #: All non-image streams of one PDF, decoded.
    max_pdf_unpacked_bytes: int = 256 << 20
    #: Pixels of one PDF image (decoded in full when a page is rendered: OCR, page images).
    max_pdf_image_pixels: int = 100_000_000

    @classmethod
    def from_environment(cls) -> ReadLimits:
        """The defaults with any ``ATOLL_READ_<FIELD>`` set in the environment (integers)."""
        overrides = {}
        for item in dataclasses.fields(cls):
            raw = os.environ.get(f"ATOLL_READ_{item.name.upper()}")
            if raw:
                try:
                    overrides[item.name] = int(raw)
                except ValueError:
                    raise ValueError(f"ATOLL_READ_{item.name.upper()}: {raw!r} is not an integer") from None
        return cls(**overrides)


#: The limits in force (tests replace it with smaller ones).
LIMITS = ReadLimits.from_environment()

#: lxml parser options for every parser of world files: entities are not expanded, no DTD
#: is loaded, nothing is fetched, and libxml2's default depth/text caps stay on.
XML_PARSER_OPTIONS = {"resolve_entities": False, "load_dtd": False, "no_network": True, "huge_tree": False}

# A document type declaration in any encoding an XML parser detects on its own.
_DOCTYPE = tuple(
    "<!DOCTYPE".encode(encoding) for encoding in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
)
_XML_SUFFIXES = (".xml", ".rels", ".vml")
_CHUNK = 1 << 20


def _looks_like_xml(name: str, head: bytes) -> bool:
    """An XML part by name or content (libraries parse parts by content type, not name)."""
    if name.lower().endswith(_XML_SUFFIXES):
        return True
    stripped = head.lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n")
    return stripped[:1] == b"<"


def check_package(data: bytes | IO[bytes], name: str, *, tree: bool = True) -> None:
    """Refuse the Office package ``data`` (the file ``name``) before a library opens it.

    Every member is inflated once and its real bytes counted. With ``tree`` (the package
    goes to a library that loads all its XML at once) the tags of all XML parts count too.
    Raises :class:`InputTooLarge` naming ``name`` and the limit crossed, and
    ``zipfile.BadZipFile`` for a damaged package (a member longer than its header says
    fails its CRC check: zipfile stops at the declared size).
    """
    bound = LIMITS
    source = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    with zipfile.ZipFile(source) as archive:
        members = archive.infolist()
        if len(members) > bound.max_members:
            raise InputTooLarge(f"{name}: has {len(members)} parts (limit {bound.max_members})")
        declared = sum(member.file_size for member in members)
        if declared > bound.max_unpacked_bytes:
            raise InputTooLarge(
                f"{name}: unpacks to {declared} bytes (limit {bound.max_unpacked_bytes} bytes unpacked)"
            )
        total = tags = 0
        for member in members:
            if member.is_dir():
                continue
            with archive.open(member) as handle:
                chunk = handle.read(_CHUNK)
                xml = _looks_like_xml(member.filename, chunk[:64])
                part = 0
                tail = b""
                while chunk:
                    total += len(chunk)
                    part += len(chunk)
                    if total > bound.max_unpacked_bytes:
                        raise InputTooLarge(
                            f"{name}: unpacks to more than {bound.max_unpacked_bytes} bytes "
                            f"(limit {bound.max_unpacked_bytes} bytes unpacked)"
                        )
                    if xml:
                        if part > bound.max_xml_part_bytes:
                            raise InputTooLarge(
                                f"{name}: part {member.filename} unpacks to more than "
                                f"{bound.max_xml_part_bytes} bytes (limit {bound.max_xml_part_bytes} per XML part)"
                            )
                        edge = tail + chunk[:40]  # a declaration split between two chunks
                        if any(needle in chunk or needle in edge for needle in _DOCTYPE):
                            raise InputTooLarge(
                                f"{name}: part {member.filename} declares a DTD (entity declarations "
                                "are refused; Office files never carry one)"
                            )
                        tail = chunk[-40:]
                        tags += chunk.count(b"<")
                        if tree and tags > bound.max_xml_tags:
                            raise InputTooLarge(
                                f"{name}: its XML holds more than {bound.max_xml_tags} tags "
                                f"(limit {bound.max_xml_tags} tags per file)"
                            )
                    chunk = handle.read(_CHUNK)


class MemberReader:
    """A zip member opened for streaming, refused up front when its header declares more than
    ``limit`` bytes (:class:`InputTooLarge` naming ``name`` and the member). Reads inflate at
    most 1 MiB per call: zipfile stops a member at its declared size, but only after
    inflating what one call asked for, and ``read()`` asks for up to 2 GiB at once."""

    def __init__(self, archive: zipfile.ZipFile, member: str, name: str, limit: int) -> None:
        info = archive.getinfo(member)
        if info.file_size > limit:
            raise InputTooLarge(
                f"{name}: part {member} unpacks to {info.file_size} bytes (limit {limit} per XML part)"
            )
        self._handle = archive.open(info)
        self._member, self._name, self._limit = member, name, limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > _CHUNK:
            pieces = []
            while piece := self.read(min(size, _CHUNK) if size > 0 else _CHUNK):
                pieces.append(piece)
                size -= len(piece) if size > 0 else 0
                if size == 0:
                    break
            return b"".join(pieces)
        data = self._handle.read(size)
        self.count += len(data)
        if self.count > self._limit:
            raise InputTooLarge(
                f"{self._name}: part {self._member} unpacks to more than {self._limit} bytes "
                f"(limit {self._limit} per XML part)"
            )
        return data

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> MemberReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- PDF ------------------------------------------------------------------------------------

_FLATE = ("/FlateDecode", "/Fl")
_LZW = ("/LZWDecode", "/LZW")
_RUN_LENGTH = ("/RunLengthDecode", "/RL")
_checked_pdfs: OrderedDict[Hashable, None] = OrderedDict()
_checked_lock = threading.Lock()


def check_pdf(document: Any, name: str, key: Hashable | None = None) -> None:
    """Refuse the open pymupdf ``document`` (the file ``name``) before its pages are read.

    Every stream that a decoder amplifies (Flate, LZW, RunLength, in any chain) is decoded
    with its output counted and cut at the limit, never held whole beyond it; images are
    checked by their declared dimensions (they are decoded only when a page is rendered).
    ``key`` (a content hash, or a file's identity and stamp) remembers a document that
    passed, so a warm tool call does not scan again. Raises :class:`InputTooLarge`.
    """
    if key is not None:
        with _checked_lock:
            if key in _checked_pdfs:
                _checked_pdfs.move_to_end(key)
                return
    bound = LIMITS
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
    if key is not None:
        with _checked_lock:
            _checked_pdfs[key] = None
            while len(_checked_pdfs) > 256:
                _checked_pdfs.popitem(last=False)


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
