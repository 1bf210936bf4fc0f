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
import re
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import IO

from atoll.errors import CodedError, ErrorCode
from atoll.settings import variable


class InputTooLarge(CodedError):
    """A file crosses a reading bound (size, count, nesting, entity declaration); the
    message names the file and the limit."""

    code = ErrorCode.too_large


@dataclass(frozen=True)
class ReadLimits:
    """How much of one file the readers process. Defaults keep one read under ~500 MiB
    of memory and a few seconds of CPU; ``ATOLL_READ_<FIELD>`` (upper case) overrides one
    for the process (e.g. ``ATOLL_READ_MAX_XML_TAGS=4000000``)."""

    #: Parts (zip members) in one Office package.
    max_members: int = 10_000
    #: All members of a package together, unpacked (counted while inflating).
    max_unpacked_bytes: int = 256 << 20
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
    #: Pixels of one raster image decoded by Pillow (an image file sent to the model: ~4 bytes
    #: each decoded, while the file may be a few KiB).
    max_image_pixels: int = 64_000_000
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
    max_pdf_image_pixels: int = 64_000_000

    @classmethod
    def from_environment(cls) -> ReadLimits:
        """The defaults with any ``ATOLL_READ_<FIELD>`` set in the environment (integers)."""
        overrides = {}
        for item in dataclasses.fields(cls):
            raw = variable(f"ATOLL_READ_{item.name.upper()}")
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

_XML_SUFFIXES = (".xml", ".rels", ".vml")
_CHUNK = 1 << 20
# A central directory entry is 46 bytes plus its name and extra fields; Office part names
# are short. Directories larger than this per allowed part are refused unparsed.
_DIRECTORY_ENTRY_BYTES = 256


def _looks_like_xml(name: str, head: bytes) -> bool:
    """An XML part by name or content (libraries parse parts by content type, not name)."""
    if name.lower().endswith(_XML_SUFFIXES):
        return True
    stripped = head.lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n")
    return stripped[:1] == b"<"


# How an XML parser reads the first bytes of a document (XML 1.0, appendix F).
_BYTE_ORDER = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\x00<", "utf-16-be"),
    (b"<\x00", "utf-16-le"),
    (b"\x4c\x6f\xa7\x94", "cp500"),  # EBCDIC
)
_ENCODING = re.compile(r"""^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
#: Encodings an Office part may declare (writers use UTF-8 or UTF-16); others (UTF-7, EBCDIC,
#: ...) would let markup hide from a byte-level look.
_ENCODINGS = {"utf-8", "utf8", "utf-16", "utf-16le", "utf-16be", "utf-32", "utf-32le", "utf-32be"}
_ENCODINGS |= {"us-ascii", "ascii", "iso-8859-1", "latin1", "latin-1", "windows-1252", "cp1252"}


def _prolog(head: bytes, part: str, name: str) -> None:
    """Refuse an XML part whose prolog (what comes before the root element, read from
    ``head``) holds a document type declaration, declares an encoding outside
    :data:`_ENCODINGS`, or does not end within ``head``. Only the prolog can hold a DTD, so
    the rest of the part is never searched."""
    encoding = next((codec for mark, codec in _BYTE_ORDER if head.startswith(mark)), "latin-1")
    text = head.decode(encoding, "replace").lstrip("\ufeff")
    declared = _ENCODING.match(text)
    if declared and declared.group(1).lower() not in _ENCODINGS:
        raise InputTooLarge(
            f"{name}: part {part} declares encoding {declared.group(1)!r} "
            "(refused: Office files are UTF-8 or UTF-16)"
        )
    if encoding == "cp500":
        raise InputTooLarge(f"{name}: part {part} is EBCDIC (refused: Office files are UTF-8 or UTF-16)")
    at = 0
    while (at := text.find("<", at)) >= 0:
        if text.startswith("<?", at):
            at = text.find("?>", at + 2)
        elif text.startswith("<!--", at):
            at = text.find("-->", at + 4)
        elif text.startswith("<!", at):
            raise InputTooLarge(
                f"{name}: part {part} declares a DTD (entity declarations are refused; "
                "Office files never carry one)"
            )
        else:
            return  # the root element: no declaration can follow
        if at < 0:
            break
    if text.find("<") >= 0 or len(head) >= _CHUNK:
        raise InputTooLarge(
            f"{name}: part {part} has an XML prolog longer than {_CHUNK} bytes (limit {_CHUNK})"
        )


_passed: OrderedDict[Hashable, None] = OrderedDict()
_passed_lock = threading.Lock()


def remembered(key: Hashable | None) -> bool:
    """Whether the file version ``key`` passed a scan before (never for None)."""
    if key is None:
        return False
    with _passed_lock:
        if key in _passed:
            _passed.move_to_end(key)
            return True
    return False


def remember(key: Hashable | None) -> None:
    """Note that the file version ``key`` passed (the last 512 are kept)."""
    if key is not None:
        with _passed_lock:
            _passed[key] = None
            while len(_passed) > 512:
                _passed.popitem(last=False)


def open_zip(source: IO[bytes], name: str) -> zipfile.ZipFile:
    """``zipfile.ZipFile(source)``, refused before the central directory is parsed when it
    holds more entries than ``max_members`` could need (zipfile builds an object per entry,
    reading the directory by its size: 200 MB of directory is millions of entries)."""
    bound = LIMITS
    # The end record zipfile itself reads (zip64 included): private, so not in the stubs.
    end = zipfile._EndRecData(source)  # type: ignore[attr-defined]
    if end is not None:
        entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
        if entries > bound.max_members or size > bound.max_members * _DIRECTORY_ENTRY_BYTES:
            raise InputTooLarge(
                f"{name}: its zip directory holds {entries} entries in {size} bytes (limit {bound.max_members} parts)"
            )
    source.seek(0)
    return zipfile.ZipFile(source)


def check_package(
    data: bytes | IO[bytes], name: str, *, tree: bool = True, key: Hashable | None = None
) -> None:
    """Refuse the Office package ``data`` (the file ``name``) before a library opens it.

    Every member is inflated once, 1 MiB at a time, and its real bytes counted; each XML
    part's prolog is read for a DTD or a foreign encoding. With ``tree`` (the package goes
    to a library that loads all its XML at once) the tags of all XML parts count too.
    ``key`` (what identifies this version of the file, which its writer cannot forge:
    content digest, or inode with mtime and ctime) remembers a package that passed, so a
    warm tool call does not scan it again. Raises :class:`InputTooLarge` naming ``name`` and
    the limit crossed, and ``zipfile.BadZipFile`` for a damaged package (a member longer
    than its header says fails its CRC check: zipfile stops at the declared size).
    """
    if remembered(key):
        return
    bound = LIMITS
    source = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    with open_zip(source, name) as archive:
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
                if xml:
                    _prolog(chunk, member.filename, name)
                part = 0
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
                        tags += chunk.count(b"<")
                        if tree and tags > bound.max_xml_tags:
                            raise InputTooLarge(
                                f"{name}: its XML holds more than {bound.max_xml_tags} tags "
                                f"(limit {bound.max_xml_tags} tags per file)"
                            )
                    chunk = handle.read(_CHUNK)
    remember(key)


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
