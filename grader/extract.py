"""Content extraction: office files, PDFs and text files to judge-readable text, in parts.

A part is what a person would point at: a sheet, a slide, a PDF page, a document body.
Workbooks also keep their cells (value and formula) so that modified workbooks can be
diffed cell by cell.  Extraction never raises: a file that cannot be read comes back with
``error`` set, and the caller decides what that means for grading.

Reading is bounded (:mod:`atoll.formats.bounds`): an Office package is scanned before a
library opens it (real unpacked bytes, parts, XML tags, no DTD), and the readers stop at
the caps on blocks, slides, rows and pages; a file past one is recorded with an error like
``too_large: /Reports/q3.docx: unpacks to more than 536870912 bytes (limit ...)``.
"""

from __future__ import annotations

import copy
import dataclasses
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from atoll.content_cache import ContentCache
from atoll.errors import AtollError

if TYPE_CHECKING:
    from atoll.formats.pdf import Extractor

TEXT_EXTENSIONS = frozenset(
    {
        "txt",
        "md",
        "csv",
        "tsv",
        "json",
        "jsonl",
        "xml",
        "html",
        "htm",
        "yaml",
        "yml",
        "py",
        "js",
        "ts",
        "sql",
        "log",
        "ini",
        "toml",
        "r",
        "tex",
        "rst",
        "ics",
        "eml",
        "mbox",
        "css",
        "sh",
    }
)
WORKBOOK_EXTENSIONS = frozenset({"xlsx", "xlsm"})
DOCUMENT_EXTENSIONS = frozenset({"docx", "docm"})
DECK_EXTENSIONS = frozenset({"pptx", "pptm"})
PDF_EXTENSIONS = frozenset({"pdf"})

MAX_CELLS_PER_SHEET = 50_000
MAX_TEXT_BYTES = 4 << 20


@dataclass
class Part:
    """One addressable piece of a file: ``name`` like ``sheet 'Model'``, ``slide 3``, ``page 2``.
    A sheet has ``cells`` (each as the judge reads it: value and ``[formula]``) and
    ``formulas`` (the formula of each formula cell, alone)."""

    name: str
    text: str
    cells: dict[str, str] | None = None
    formulas: dict[str, str] | None = None


@dataclass
class Extracted:
    """The text of a file in parts; ``error`` says why it could not be read (then parts is empty)."""

    kind: str
    parts: list[Part] = field(default_factory=list)
    error: str | None = None
    note: str | None = None

    def text(self) -> str:
        if self.error:
            return f"[could not extract {self.kind} content: {self.error}]"
        if self.note and not self.parts:
            return f"[{self.note}]"
        if len(self.parts) == 1 and self.parts[0].name == "content":
            return self.parts[0].text
        return "\n\n".join(f"## {part.name}\n{part.text}" for part in self.parts)


@dataclass
class ExtractOptions:
    """Knobs for extraction; OCR runs only on PDF pages without a text layer, up to a cap."""

    ocr: bool = True
    recalculate: bool = True  # compute formulas that have no cached value (LibreOffice)
    max_file_bytes: int = 200 << 20  # larger changed files are listed, not extracted
    # Changed files are read into memory together: past this total the rest are listed, not
    # read (twenty 199 MiB files of zeros compress to a few MB and would take 4 GiB).
    max_total_bytes: int = 512 << 20
    ocr_max_pages: int = 3
    ocr_timeout_s: float = 30.0


def extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


#: Extractions by content: (sha256 of the bytes, path, options, read limits) -> what came out.
#: A trial's grading extracts a file it changed for the diff and again for a check that reads
#: it, and every trial of a task extracts the seed's version of each file it modifies. Only
#: documents, decks and text files, and only extractions without an error: a workbook may be
#: recalculated (volatile formulas), a PDF OCR'd under a timeout. Each caller gets a copy
#: (the first too: what is kept is never handed out).
_EXTRACTED: ContentCache[Extracted] = ContentCache(
    max_entries=64,
    max_weight=64 << 20,
    weigh=lambda extracted: sum(len(part.text) for part in extracted.parts),
    keep=lambda extracted: extracted.error is None,
)
_BY_CONTENT = DOCUMENT_EXTENSIONS | DECK_EXTENSIONS | TEXT_EXTENSIONS


def extract(path: str, data: bytes, options: ExtractOptions | None = None) -> Extracted:
    """Extract ``data`` (the bytes of the file at ``path``) by its extension; never raises.
    The same bytes at the same path are extracted once (see ``_EXTRACTED``)."""
    options = options or ExtractOptions()
    ext = extension(path)
    if ext not in _BY_CONTENT:
        return _extract(path, data, options, ext)
    from atoll.formats import bounds

    name = (path, dataclasses.astuple(options), repr(bounds.LIMITS))
    return copy.deepcopy(_EXTRACTED.get(data, name, lambda: _extract(path, data, options, ext)))


def _extract(path: str, data: bytes, options: ExtractOptions, ext: str) -> Extracted:
    try:
        if ext in WORKBOOK_EXTENSIONS | DOCUMENT_EXTENSIONS | DECK_EXTENSIONS:
            from atoll.formats.bounds import check_package

            # Workbooks are streamed (rows and cells capped), documents and decks are
            # loaded whole: only those count their XML tags.
            check_package(data, path, tree=ext not in WORKBOOK_EXTENSIONS)
        if ext in WORKBOOK_EXTENSIONS:
            if options.recalculate:
                from atoll.formats.libreoffice import with_computed_values

                data = with_computed_values(data, name=path)
            return _workbook(path, data)
        if ext in DOCUMENT_EXTENSIONS:
            return _document(path, data)
        if ext in DECK_EXTENSIONS:
            return _deck(path, data)
        if ext in PDF_EXTENSIONS:
            return _pdf(path, data, options)
        return _text(ext, data)
    except AtollError as exc:  # a reading bound: its code and the line naming file and limit
        return Extracted(kind=ext or "file", error=f"{exc.code}: {exc.message[:300]}")
    except Exception as exc:  # noqa: BLE001 - untrusted files fail in many library-specific ways
        kind = ext or "file"
        return Extracted(kind=kind, error=f"{type(exc).__name__}: {str(exc)[:300]}")


# --- workbooks -----------------------------------------------------------------------------


def _cell_text(value: object) -> str:
    """A cell as the judge reads it: the value the spreadsheet tools show, as text."""
    from atoll.formats.xlsx import display

    shown = display(value)
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "TRUE" if shown else "FALSE"
    return str(shown)


def _render_cell(value: object, formula: str | None) -> str:
    if formula:
        computed = _cell_text(value)
        return f"{computed} [{formula}]" if computed else f"[{formula}]"
    return _cell_text(value)


def _workbook(path: str, data: bytes) -> Extracted:
    """Sheets as text, read by the spreadsheet tools' reader (values and formulas in one pass)."""
    from atoll.formats import bounds
    from atoll.formats.xlsx import XlsxReader, column_letter

    row_limit = bounds.LIMITS.max_extracted_rows
    parts: list[Part] = []
    with XlsxReader(io.BytesIO(data), name=path) as reader:
        for sheet in reader.sheets:
            cells: dict[str, str] = {}
            formulas: dict[str, str] = {}
            lines: list[str] = []
            row_items: list[str] = []
            current_row = None
            truncated = False
            for cell in reader.cells(sheet, 1, 1, None, None, stop_row=row_limit):
                if cell.row != current_row and row_items:
                    lines.append(" | ".join(row_items))
                    row_items = []
                current_row = cell.row
                coordinate = f"{column_letter(cell.col)}{cell.row}"
                shown = _render_cell(cell.value, cell.formula)
                cells[coordinate] = shown
                if cell.formula:
                    formulas[coordinate] = cell.formula
                row_items.append(f"{coordinate}: {shown}")
                if len(cells) >= MAX_CELLS_PER_SHEET:
                    truncated = True
                    break
            if row_items:
                lines.append(" | ".join(row_items))
            if truncated:
                lines.append(f"[sheet truncated after {MAX_CELLS_PER_SHEET} cells]")
            elif reader.stopped:
                lines.append(f"[sheet truncated after row {row_limit}]")
            text = "\n".join(lines) if lines else "[empty sheet]"
            parts.append(Part(name=f"sheet '{sheet.name}'", text=text, cells=cells, formulas=formulas))
    return Extracted(kind="xlsx", parts=parts)


# --- documents -----------------------------------------------------------------------------


def _document(path: str, data: bytes) -> Extracted:
    """The body as read_document_content shows it (each block with its identifier, tracked
    changes as ``{++inserted++}`` / ``{--deleted--}``), then headers/footers and comments."""
    import docx

    from atoll.formats.docx.comments import read_comments
    from atoll.formats.docx.elements import paragraph_text, paragraphs_of
    from atoll.formats.docx.reading import read_blocks, render_block

    document = docx.Document(io.BytesIO(data))
    # Empty paragraphs (spacing) keep their place in the numbering but add nothing to read.
    blocks = [
        render_block(block)
        for block in read_blocks(document, name=path)
        if block["type"] == "table"
        or block["text"].strip()
        or any(block.get(key) for key in ("tracked_changes", "images", "text_boxes"))
    ]
    parts = [Part(name="body", text="\n".join(blocks) if blocks else "[empty document]")]
    extras: list[str] = []
    for section_index, section in enumerate(document.sections):
        for label, story in (("header", section.header), ("footer", section.footer)):
            if story.is_linked_to_previous and section_index > 0:
                continue
            text = "\n".join(paragraph_text(p) for p in paragraphs_of(story._element)).strip()
            if text:
                extras.append(f"[{label}.s.{section_index}] {text}")
    if extras:
        parts.append(Part(name="headers and footers", text="\n".join(extras)))
    comments = []
    for comment in read_comments(document):
        anchor = f" on {comment['anchor']}" if comment["anchor"] else ""
        quoted = f" ({comment['anchored_text']!r})" if comment["anchored_text"] else ""
        comments.append(f"comment by {comment['author'] or 'unknown'}{anchor}{quoted}: {comment['text']}")
    if comments:
        parts.append(Part(name="comments", text="\n".join(comments)))
    return Extracted(kind="docx", parts=parts)


# --- decks ---------------------------------------------------------------------------------


def _deck(path: str, data: bytes) -> Extracted:
    """Slides as read_slides shows them (title, shapes in order, tables, charts with their data,
    pictures by their ``slide.{i}.image.{k}`` annotation, notes). Parts are numbered from 1, as
    people count slides; the tools' 0-based ``slide_index`` is given in each part."""
    from pptx import Presentation

    from atoll.formats.bounds import LIMITS, InputTooLarge
    from atoll.formats.pptx import render_slide, slide_info

    deck = Presentation(io.BytesIO(data))
    if len(deck.slides) > LIMITS.max_slides:
        raise InputTooLarge(f"{path}: has {len(deck.slides)} slides (limit {LIMITS.max_slides})")
    parts: list[Part] = []
    cache: dict = {}
    for index, slide in enumerate(deck.slides):
        info = slide_info(slide, index, cache)
        heading, *lines = render_slide(info).splitlines()
        hidden = ", hidden" if info["hidden"] else ""
        lines.insert(0, f"[slide_index {index}, layout: {info['layout']}{hidden}]")
        text = "\n".join(lines) if len(lines) > 1 else lines[0] + "\n[empty slide]"
        parts.append(Part(name=f"slide {index + 1}", text=text))
    return Extracted(kind="pptx", parts=parts)


# --- PDFs ----------------------------------------------------------------------------------


_pdf_readers: dict[float, Extractor] = {}


def _pdf_reader(timeout_s: float) -> Extractor:
    """One page reader per OCR timeout (it caches OCR results by content hash and page)."""
    from atoll.formats.pdf import Extractor

    return _pdf_readers.setdefault(timeout_s, Extractor(ocr_timeout_s=timeout_s))


def _pdf(path: str, data: bytes, options: ExtractOptions) -> Extracted:
    """Pages as read_pdf_pages reads them (text layer, then pypdf, then OCR for image-only
    pages: the same reader), OCR capped at ``options.ocr_max_pages`` per document; under
    pymupdf's one lock (atoll.formats.pdf.MUPDF_LOCK: it does not support threads)."""
    from atoll.formats.pdf import MUPDF_LOCK

    with MUPDF_LOCK:
        return _pdf_locked(path, data, options)


def _pdf_locked(path: str, data: bytes, options: ExtractOptions) -> Extracted:
    import hashlib

    import pymupdf

    from atoll.formats import bounds
    from atoll.formats.pdf import PdfSource, needs_ocr
    from atoll.formats.pdf_bounds import check_pdf

    reader = _pdf_reader(options.ocr_timeout_s)
    source = PdfSource("sha256:" + hashlib.sha256(data).hexdigest(), None, data)
    parts: list[Part] = []
    ocr_done = 0
    notes: list[str] = []
    with pymupdf.open(stream=data, filetype="pdf") as document:
        check_pdf(document, path, key=source.key)
        limit = bounds.LIMITS.max_pdf_pages
        if document.page_count > limit:
            notes.append(f"only the first {limit} of {document.page_count} pages read (limit per file)")
        for number in range(1, min(document.page_count, limit) + 1):
            scanned = needs_ocr(document, number)
            allow = options.ocr and ocr_done < options.ocr_max_pages
            page = reader.page_text(document, source, number, allow_ocr=allow, details=False)
            text = page.text.strip()
            if page.engine == "ocr":
                ocr_done += 1
                text = f"[OCR] {text}" if text else "[scanned page: OCR found no text]"
            elif scanned and not text:
                if allow:
                    text = f"[scanned page: {page.note}]"
                else:
                    text = "[scanned page without a text layer; OCR page cap reached]"
                    notes.append(f"page {number} not OCR'd")
            parts.append(Part(name=f"page {number}", text=text or "[empty page]"))
    return Extracted(kind="pdf", parts=parts, note="; ".join(notes) or None)


# --- text ----------------------------------------------------------------------------------


def _text(ext: str, data: bytes) -> Extracted:
    head = data[:8192]
    if ext not in TEXT_EXTENSIONS and b"\x00" in head:
        return Extracted(kind=ext or "binary", note=f"binary file, {len(data)} bytes, not extracted")
    truncated = len(data) > MAX_TEXT_BYTES
    text = data[:MAX_TEXT_BYTES].decode("utf-8", "replace")
    if truncated:
        text += f"\n[truncated at {MAX_TEXT_BYTES} of {len(data)} bytes]"
    return Extracted(kind=ext or "text", parts=[Part(name="content", text=text)])
