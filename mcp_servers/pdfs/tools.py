"""The pdfs server's tools (individual names as in the reference; consolidated tool ``pdf``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, WithJsonSchema

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats import bounds
from atoll.formats import pdf as pdf_format
from atoll.formats.pdf import Extractor, PageText, PdfSource, holds_mupdf
from mcp_servers._core import (
    FileStamp,
    ImageBlock,
    ServerContext,
    ServerDefinition,
    ToolError,
    ToolOutput,
)
from mcp_servers._core.options import ServerOptions
from mcp_servers.pdfs.create import METADATA_KEYS, Block, output_path, render_pdf
from mcp_servers.pdfs.extract import open_pdf, parse_pages
from mcp_servers.pdfs.results import PagesRead, PdfCreated, PdfImage, PdfSearch

pymupdf = lazy_module("pymupdf")  # ~0.8 s of CPU: imported on the first call that reads a PDF

if TYPE_CHECKING:
    from pymupdf import Document

DEFAULT_MAX_CHARS = 20_000
DEFAULT_MAX_OCR_PAGES = 10
MAX_IMAGE_PIXELS = 25_000_000


@dataclass
class PdfState:
    ctx: ServerContext
    extractor: Extractor

    @classmethod
    def create(cls, ctx: ServerContext) -> PdfState:
        return cls(
            ctx=ctx,
            extractor=Extractor(
                tesseract=ctx.option("tesseract", "tesseract"),
                ocr_timeout_s=ctx.option("ocr_timeout_s", 120.0),
            ),
        )

    @property
    def max_ocr_pages(self) -> int:
        return self.ctx.option("max_ocr_pages", DEFAULT_MAX_OCR_PAGES)  # typed by PdfsOptions

    def pdf(self, file_path: str, *, argument: str = "file_path") -> tuple[PdfSource, str, Document]:
        """(the bytes read through the root's descriptor, virtual path, open document)."""
        target = self.ctx.files.at(file_path, argument=argument, allow_root=False).require("file")
        virtual = target.virtual
        if target.suffix.lower() != ".pdf":
            raise ToolError(
                ErrorCode.unsupported, f"{argument}: {virtual} is not a .pdf file", argument=argument
            )
        with target.open() as handle:
            info = os.fstat(handle.fileno())
            # With the ctime, which no writer can set back (utime sets mtime, not ctime): the
            # stream scan and the OCR cache remember versions by it.
            stamp = (FileStamp.from_stat(info), info.st_ctime_ns)
            source = PdfSource(target.lock_key, stamp, handle.read())
        return source, virtual, open_pdf(source, virtual, argument=argument)


class PdfsOptions(ServerOptions):
    """Options of the pdfs server."""

    tesseract: str | None = Field(None, description="tesseract executable (default: tesseract on PATH)")
    ocr_timeout_s: float | None = Field(None, gt=0, description="limit of one page's OCR (default 120)")
    max_ocr_pages: int | None = Field(None, ge=0, description="pages OCR'd per call")


SERVER = ServerDefinition(
    "pdfs",
    consolidated_name="pdf",
    description=(
        "PDF files in the world's filesystem: read text per page (OCR for scanned pages), images, search, "
        "and create PDFs. Paths are virtual ('/Reports/q3.pdf')."
    ),
    state=PdfState.create,
    options=PdfsOptions,
)


def _render_page(entry: PageText) -> str:
    lines = [f"--- page {entry.page} ({entry.engine}) ---", entry.text.rstrip()]
    if entry.images:
        shown = ", ".join(
            f"{i['annotation']} ({i['width']}x{i['height']})"
            if "annotation" in i
            else f"+{i['more_images']} more"
            for i in entry.images
        )
        lines.append(f"[images: {shown}]")
    if entry.strikethrough:
        lines.append("[struck through: " + " | ".join(entry.strikethrough) + "]")
    if entry.note:
        lines.append(f"[{entry.note}]")
    return "\n".join(lines)


@SERVER.tool(action="read_pages", read_only=True)
@holds_mupdf
def read_pdf_pages(
    state: PdfState,
    file_path: str,
    pages: str | int | list[int] | None = None,
    max_chars: Annotated[int, Field(ge=100, le=200_000)] = DEFAULT_MAX_CHARS,
) -> ToolOutput[PagesRead]:
    """Read the text of PDF pages, page by page (scanned pages are OCR'd).

    Also lists each page's embedded images (ids for read_image) and struck-through text.
    Output is capped at max_chars; a continuation tells which pages to read next.

    Args:
        file_path: The .pdf file.
        pages: 1-based pages: '1-3,7', 5 or [1, 2]; all pages (up to the cap) when omitted.
        max_chars: Cap on the text returned by this call.
    """
    path, virtual, document = state.pdf(file_path)
    try:
        wanted = parse_pages(pages, document.page_count)
        results: list[PageText] = []
        used = 0
        ocr_done = 0
        stop_at: int | None = None
        cut_page = False
        for position, number in enumerate(wanted):
            if position >= bounds.LIMITS.max_pdf_pages:  # pages without text never fill max_chars
                stop_at = number
                break
            needs_ocr = (
                pdf_format.needs_ocr(document, number) and state.extractor.cached_ocr(path, number) is None
            )
            if needs_ocr and ocr_done >= state.max_ocr_pages:
                stop_at = number
                break
            entry = state.extractor.page_text(document, path, number)
            ocr_done += needs_ocr
            if results and used + len(entry.text) > max_chars:
                stop_at = number
                break
            if len(entry.text) > max_chars - used:
                entry.text = entry.text[: max_chars - used]
                entry.note = (entry.note + "; " if entry.note else "") + "page text cut at the output cap"
                cut_page = True
            used += len(entry.text)
            results.append(entry)
        count = document.page_count
    finally:
        document.close()
    data: dict[str, Any] = {
        "file_path": virtual,
        "page_count": count,
        "pages": [
            {k: v for k, v in vars(entry).items() if v not in (None, []) or k in ("text",)}
            for entry in results
        ],
    }
    if stop_at is not None or cut_page:
        rest = wanted[wanted.index(stop_at) :] if stop_at is not None else wanted[len(results) :]
        data["truncated"] = True
        if rest:
            data["continuation"] = f"call again with pages='{_compress(rest)}'"
        else:
            data["continuation"] = (
                f"page {results[-1].page} was cut at max_chars={max_chars}; raise max_chars to read all of it"
            )
    text = "\n\n".join(_render_page(entry) for entry in results)
    text = f"{virtual}: {count} pages\n\n" + text
    if data.get("truncated"):
        text += f"\n\n(truncated: {data['continuation']})"
    return ToolOutput(PagesRead.from_fields(data), text=text)


def _compress(numbers: list[int]) -> str:
    """[3,4,5,9] -> '3-5,9'."""
    parts: list[str] = []
    start = prev = numbers[0]
    for number in numbers[1:] + [None]:
        if number is not None and number == prev + 1:
            prev = number
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if number is not None:
            start = prev = number
    return ",".join(parts)


@SERVER.tool(action="read_image", read_only=True)
@holds_mupdf
def read_image(state: PdfState, file_path: str, annotation: str) -> ToolOutput[PdfImage]:
    """An image embedded in a PDF, by the annotation read_pdf_pages reported (e.g. 'page2_image1').

    Args:
        file_path: The .pdf file.
        annotation: The image's id as listed by read_pdf_pages: 'page<N>_image<K>'.
    """
    match = re.fullmatch(r"\s*page(\d+)_image(\d+)\s*", annotation or "")
    if not match:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"annotation: {annotation!r} is not like 'page2_image1'",
            argument="annotation",
        )
    number, index = int(match.group(1)), int(match.group(2))
    _, virtual, document = state.pdf(file_path)
    try:
        if not 1 <= number <= document.page_count:
            raise ToolError(
                ErrorCode.not_found,
                f"annotation: page {number} does not exist ({document.page_count} pages)",
                argument="annotation",
            )
        images = document[number - 1].get_images(full=True)
        if not 1 <= index <= len(images):
            raise ToolError(
                ErrorCode.not_found,
                f"annotation: page {number} has {len(images)} image(s), not {index}",
                argument="annotation",
            )
        xref = images[index - 1][0]
        pixmap = pymupdf.Pixmap(document, xref)
        if pixmap.width * pixmap.height > MAX_IMAGE_PIXELS:
            raise ToolError(
                ErrorCode.too_large,
                f"annotation: image of {pixmap.width}x{pixmap.height} pixels is too large",
                argument="annotation",
            )
        if pixmap.alpha or pixmap.colorspace is None or pixmap.colorspace.n not in (1, 3):
            pixmap = pymupdf.Pixmap(pymupdf.csRGB, pixmap)
        png = pixmap.tobytes("png")
        image = PdfImage(
            file_path=virtual,
            annotation=annotation.strip(),
            page=number,
            width=pixmap.width,
            height=pixmap.height,
            mime_type="image/png",
        )
    finally:
        document.close()
    return ToolOutput(
        image,
        text=f"{virtual} {annotation.strip()}: {image.width}x{image.height} PNG",
        images=[ImageBlock(png, "image/png")],
    )


@SERVER.tool(action="read_page_as_image", read_only=True)
@holds_mupdf
def read_page_as_image(
    state: PdfState,
    file_path: str,
    page_number: Annotated[int, Field(ge=1)],
    dpi: Annotated[int, Field(ge=36, le=300)] = 150,
) -> ToolOutput[PdfImage]:
    """One PDF page rendered as a PNG image (to see layout, charts, scans).

    Args:
        file_path: The .pdf file.
        page_number: 1-based page.
        dpi: Resolution (36-300).
    """
    _, virtual, document = state.pdf(file_path)
    try:
        if page_number > document.page_count:
            raise ToolError(
                ErrorCode.invalid_argument,
                f"page_number: page {page_number} does not exist ({document.page_count} pages)",
                argument="page_number",
            )
        page = document[page_number - 1]
        scale = dpi / 72
        if page.rect.width * scale * page.rect.height * scale > MAX_IMAGE_PIXELS:
            raise ToolError(
                ErrorCode.too_large,
                f"page_number: page {page_number} is too large at {dpi} dpi; lower dpi",
                argument="dpi",
            )
        pixmap = page.get_pixmap(dpi=dpi)
        png = pixmap.tobytes("png")
        image = PdfImage(
            file_path=virtual,
            page=page_number,
            width=pixmap.width,
            height=pixmap.height,
            dpi=dpi,
            mime_type="image/png",
        )
    finally:
        document.close()
    return ToolOutput(
        image,
        text=f"{virtual} page {page_number}: {image.width}x{image.height} PNG at {dpi} dpi",
        images=[ImageBlock(png, "image/png")],
    )


@SERVER.tool(action="search", read_only=True)
@holds_mupdf
def search_pdf(
    state: PdfState,
    file_path: str,
    query: str,
    case_sensitive: bool = False,
    whole_word: bool = False,
    max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
    context_chars: Annotated[int, Field(ge=0, le=500)] = 50,
) -> PdfSearch:
    """Find text in a PDF; each match gives its page, line (1-based within the page), column and context.

    Args:
        file_path: The .pdf file.
        query: Text to find (literal, not a pattern); runs of spaces match any whitespace.
        case_sensitive: Match case exactly.
        whole_word: Only matches not inside a longer word.
        max_results: Cap on matches returned.
        context_chars: Characters of context on each side.
    """
    if not query or not query.strip():
        raise ToolError(ErrorCode.invalid_argument, "query: must not be empty", argument="query")
    if len(query) > 1000:
        raise ToolError(ErrorCode.invalid_argument, "query: longer than 1000 characters", argument="query")
    pattern_text = r"\s+".join(re.escape(part) for part in query.split())
    if whole_word:
        pattern_text = rf"(?<!\w){pattern_text}(?!\w)"
    pattern = re.compile(pattern_text, 0 if case_sensitive else re.IGNORECASE)
    path, virtual, document = state.pdf(file_path)
    results: list[dict[str, Any]] = []
    total = 0
    skipped: list[int] = []
    ocr_done = 0
    limit = bounds.LIMITS.max_pdf_pages
    try:
        for number in range(1, min(document.page_count, limit) + 1):
            needs_ocr = (
                pdf_format.needs_ocr(document, number) and state.extractor.cached_ocr(path, number) is None
            )
            allow = not needs_ocr or ocr_done < state.max_ocr_pages
            entry = state.extractor.page_text(document, path, number, allow_ocr=allow, details=False)
            ocr_done += needs_ocr and allow
            if needs_ocr and not allow:
                skipped.append(number)
            text = entry.text
            line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
            for match in pattern.finditer(text):
                total += 1
                if len(results) >= max_results:
                    continue
                line = _line_of(line_starts, match.start())
                results.append(
                    {
                        "page": number,
                        "line": line + 1,
                        "column": match.start() - line_starts[line] + 1,
                        "match": match.group(0),
                        "context": text[
                            max(0, match.start() - context_chars) : match.end() + context_chars
                        ].replace("\n", " "),
                        "engine": entry.engine,
                    }
                )
        count = document.page_count
    finally:
        document.close()
    data: dict[str, Any] = {
        "file_path": virtual,
        "query": query,
        "page_count": count,
        "total_matches": total,
        "results": results,
    }
    if total > len(results):
        data["truncated"] = True
        data["continuation"] = f"{total - len(results)} more matches; raise max_results (max 1000)"
    notes = []
    if skipped:
        data["pages_not_searched"] = skipped
        notes.append(
            f"image-only pages beyond the OCR limit ({state.max_ocr_pages} per call) were not searched; read them with read_pdf_pages first"
        )
    if count > limit:
        data["truncated"] = True
        notes.append(f"only the first {limit} of {count} pages were searched (limit per call)")
    if notes:
        data["note"] = "; ".join(notes)
    return PdfSearch.from_fields(data)


def _line_of(starts: list[int], offset: int) -> int:
    import bisect

    return bisect.bisect_right(starts, offset) - 1


#: The keys render_pdf writes (others are ignored), named so that the schema is an object with
#: properties (an open map is refused by Gemini: atoll.tool_schemas).
_METADATA_SCHEMA = {
    "type": "object",
    "properties": {key: {"type": "string"} for key in METADATA_KEYS},
}


@SERVER.tool(action="create")
@holds_mupdf
def create_pdf(
    state: PdfState,
    directory: str,
    file_name: str,
    content: list[Block],
    metadata: Annotated[dict[str, str] | None, WithJsonSchema(_METADATA_SCHEMA)] = None,
    page_size: str = "A4",
) -> PdfCreated:
    """Create a PDF from content blocks; any script (Greek, Cyrillic, Arabic, CJK, ...) is embedded.

    Args:
        directory: Folder for the file, e.g. '/Outputs' (created if missing).
        file_name: File name ('.pdf' added when missing).
        content: Blocks in order: {"type": "heading", "text", "level"}, {"type": "paragraph", "text"},
            {"type": "bullets", "items": [...]}, {"type": "numbered_list", "items": [...]},
            {"type": "table", "rows": [[...]], "header": true}, {"type": "page_break"}.
        metadata: Optional {"title", "author", "subject", "keywords"}.
        page_size: A4, Letter, Legal, A3 or A5.
    """
    target, virtual = output_path(state.ctx, directory, file_name)
    data = render_pdf(content, page_size=page_size, metadata=metadata)
    target.write_atomic(data, make_parents=True, overwrite=False)
    pages = pymupdf.open(stream=data, filetype="pdf").page_count
    return PdfCreated(file_path=virtual, pages=pages, bytes=len(data))
