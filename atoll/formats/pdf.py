"""Text, images and strike-through marks of PDF pages, with engine fallback and OCR.

Per page: PyMuPDF's text layer first; when it yields no text, pypdf's (a different parser
that sometimes reads fonts PyMuPDF cannot map); when both are empty and the page carries
an image, OCR with tesseract on a 300-dpi rendering (``OMP_THREAD_LIMIT=1``: ~4 s per dense
page on 2 cores, faster than tesseract's own threading there). Each page says which
engine produced its text. OCR results are cached in the process by content and page.

The pdfs server's tools and the grader read pages with :class:`Extractor`, so agent and
judge get the same text (and the same OCR) for a page.
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import shutil
import subprocess
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from atoll.errors import AtollError, ErrorCode
from atoll.settings import child_environment

if TYPE_CHECKING:
    import pymupdf  # imported by the functions that use it (~0.8 s of CPU)

P = ParamSpec("P")
R = TypeVar("R")

# PyMuPDF does not support threads: MuPDF's context (its exception stack, its stores) is
# shared by every document of a process, and two threads inside it at once corrupt memory
# (seen here as "double free or corruption", a 480-trial run killed by glibc). The servers run
# tool bodies in worker threads and the grader extracts in worker threads of the same process,
# so every use of pymupdf holds this one lock: the pdfs server's tools and the grader's PDF
# extraction take it for their whole body (see docs/security.md).
MUPDF_LOCK = threading.RLock()


def holds_mupdf(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run under :data:`MUPDF_LOCK` (a tool body or extraction that uses pymupdf)."""

    @functools.wraps(function)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        with MUPDF_LOCK:
            return function(*args, **kwargs)

    return locked


OCR_DPI = 300
MAX_IMAGES_LISTED = 50
OCR_TIMEOUT_S = 120.0
# Arabic presentation forms (shaped glyphs written by PDF producers) and Latin ligatures:
# normalised back to ordinary letters so text reads and searches as typed.
_COMPATIBILITY_FORMS = re.compile("[\ufb00-\ufb06\ufb50-\ufdff\ufe70-\ufeff]+")


@dataclass
class PageText:
    """One page's extraction result."""

    page: int
    text: str
    engine: str  # "pymupdf" | "pypdf" | "ocr" | "none"
    images: list[dict[str, Any]] = field(default_factory=list)
    strikethrough: list[str] = field(default_factory=list)
    note: str | None = None


def normalise(text: str) -> str:
    """Map presentation-form and ligature characters to their plain letters (NFKC on those only)."""
    return _COMPATIBILITY_FORMS.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)


def usable(text: str) -> bool:
    """Whether an engine's text is worth returning: not empty, and not mostly U+FFFD (what
    engines emit for fonts without a Unicode map)."""
    stripped = "".join(text.split())
    return bool(stripped) and stripped.count("\ufffd") <= len(stripped) * 0.3


@dataclass(frozen=True)
class PdfSource:
    """A PDF's bytes as read once, and what identifies that version (``key``: a name, never
    opened; ``stamp``: e.g. the file's ``fstat`` stamp, or None when ``key`` is a content hash)."""

    key: str
    stamp: Hashable
    data: bytes

    @functools.cached_property
    def content(self) -> str:
        """The sha256 of the bytes: what OCR results are cached by (computed once)."""
        return hashlib.sha256(self.data).hexdigest()


class OcrError(AtollError):
    """tesseract is missing, failed or timed out; ``code`` is a stable error code."""


def needs_ocr(document: pymupdf.Document, number: int) -> bool:
    """Whether reading page ``number`` will (probably) run OCR: no usable text, an image."""
    page = document[number - 1]
    return not usable(page.get_text("text")) and bool(page.get_images())


def page_images(page: pymupdf.Page) -> list[dict[str, Any]]:
    """Images drawn on a page: annotation id (for read_image), size, position. At most
    ``MAX_IMAGES_LISTED`` are described (a tiled scan can hold thousands); the rest are
    counted in one last entry."""
    found: list[dict[str, Any]] = []
    images = page.get_images(full=True)
    for index, info in enumerate(images[:MAX_IMAGES_LISTED], start=1):
        xref, width, height = info[0], info[2], info[3]
        rects = page.get_image_rects(xref)
        entry: dict[str, Any] = {
            "annotation": f"page{page.number + 1}_image{index}",
            "width": width,
            "height": height,
        }
        if rects:
            r = rects[0]
            entry["bbox"] = [round(r.x0, 1), round(r.y0, 1), round(r.x1, 1), round(r.y1, 1)]
        found.append(entry)
    if len(images) > MAX_IMAGES_LISTED:
        found.append({"more_images": len(images) - MAX_IMAGES_LISTED})
    return found


def strikethrough_text(page: pymupdf.Page) -> list[str]:
    """Text covered by strike-out annotations on a page."""
    import pymupdf

    marks = []
    for annot in page.annots() or []:
        if annot.type[0] == pymupdf.PDF_ANNOT_STRIKE_OUT:  # type: ignore[attr-defined]  # not in its stubs
            text = page.get_textbox(annot.rect).strip()
            marks.append(normalise(text) if text else "(strike-out mark over no text)")
    return marks


#: OCR results of the process, by (the PDF's sha256, page, tesseract): every world of a task
#: is a fresh copy of the same files, and the agent's tools and the grader of every trial read
#: the same scanned pages, so the same bytes are recognised once (tesseract: seconds of CPU a
#: page). The most recently used are kept.
_OCR_CACHE: OrderedDict[tuple[str, int, str], str] = OrderedDict()
_OCR_CACHE_ENTRIES = 256
_OCR_LOCK = threading.Lock()


class Extractor:
    """Page extraction with the process's OCR cache (thread-safe)."""

    def __init__(self, *, tesseract: str = "tesseract", ocr_timeout_s: float = OCR_TIMEOUT_S) -> None:
        self.tesseract = tesseract
        self.ocr_timeout_s = ocr_timeout_s

    def page_text(
        self,
        document: pymupdf.Document,
        path: PdfSource,
        number: int,
        *,
        allow_ocr: bool = True,
        details: bool = True,
    ) -> PageText:
        """Text of page ``number`` (1-based) with the fallback chain (see the module docstring)."""
        page = document[number - 1]
        images = page_images(page) if details else []
        marks = strikethrough_text(page) if details else []
        text = page.get_text("text", sort=False)
        if usable(text):
            return PageText(number, normalise(text), "pymupdf", images, marks)
        fallback = _pypdf_text(path, number)
        if usable(fallback):
            return PageText(number, normalise(fallback), "pypdf", images, marks)
        has_images = bool(images) if details else bool(page.get_images())
        if not has_images:
            if text.strip() or fallback.strip():  # unreadable glyphs are better than nothing
                return PageText(
                    number, normalise(text), "pymupdf", images, marks, note="text mostly unmappable glyphs"
                )
            return PageText(number, "", "none", images, marks, note="the page has no text")
        if not allow_ocr:
            return PageText(
                number, "", "none", images, marks, note="image-only page; OCR skipped (limit per call)"
            )
        try:
            text = self.ocr(page, path, number)
        except OcrError as exc:
            return PageText(number, "", "none", images, marks, note=f"OCR failed: {exc.message}")
        return PageText(number, text, "ocr", images, marks)

    def cached_ocr(self, path: PdfSource, number: int) -> str | None:
        key = (path.content, number, self.tesseract)
        with _OCR_LOCK:
            text = _OCR_CACHE.get(key)
            if text is not None:
                _OCR_CACHE.move_to_end(key)
            return text

    def ocr(self, page: pymupdf.Page, path: PdfSource, number: int) -> str:
        """tesseract's text for a rendered page; OcrError when tesseract is missing or fails."""
        import pymupdf

        cached = self.cached_ocr(path, number)
        if cached is not None:
            return cached
        from atoll.formats import bounds

        scale = OCR_DPI / 72
        pixels = int(page.rect.width * scale * page.rect.height * scale)
        if pixels > bounds.LIMITS.max_pdf_image_pixels:
            raise OcrError(
                ErrorCode.too_large,
                f"page {number} renders to {pixels} pixels at {OCR_DPI} dpi "
                f"(limit {bounds.LIMITS.max_pdf_image_pixels})",
            )
        if shutil.which(self.tesseract) is None:
            raise OcrError(ErrorCode.unsupported, "OCR needs tesseract, which is not installed")
        png = page.get_pixmap(dpi=OCR_DPI, colorspace=pymupdf.csGRAY).tobytes("png")
        env = child_environment(OMP_THREAD_LIMIT="1")
        try:
            done = subprocess.run(
                [self.tesseract, "stdin", "stdout", "-l", "eng", "--psm", "3"],
                input=png,
                capture_output=True,
                timeout=self.ocr_timeout_s,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise OcrError(
                ErrorCode.too_large, f"OCR of page {number} took longer than {self.ocr_timeout_s:g} s"
            ) from None
        if done.returncode != 0:
            raise OcrError(
                ErrorCode.internal,
                f"tesseract failed on page {number}: {done.stderr.decode(errors='replace')[:200]}",
            )
        text = done.stdout.decode("utf-8", "replace")
        with _OCR_LOCK:
            _OCR_CACHE[(path.content, number, self.tesseract)] = text
            while len(_OCR_CACHE) > _OCR_CACHE_ENTRIES:
                _OCR_CACHE.popitem(last=False)
        return text


def _pypdf_text(path: PdfSource, number: int) -> str:
    # Imported outside the try: every image that reads PDFs installs pypdf (the `formats` extra),
    # and a missing one must fail loudly rather than make this engine silently read nothing.
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(path.data))
        return reader.pages[number - 1].extract_text() or ""
    except Exception:  # the second engine is best effort; the first one already read the page
        return ""
