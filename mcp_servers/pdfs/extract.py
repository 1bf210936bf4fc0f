"""Opening a PDF for the tools and reading their page selections (errors as ToolError);
the page reading itself is :mod:`atoll.formats.pdf`, shared with the grader."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats import bounds
from atoll.formats.pdf import PdfSource
from atoll.formats.pdf_bounds import check_pdf
from mcp_servers._core import ToolError

pymupdf = lazy_module("pymupdf")  # ~0.8 s of CPU: imported on the first call that reads a PDF

if TYPE_CHECKING:
    from pymupdf import Document


def open_pdf(source: PdfSource, virtual: str, *, argument: str = "file_path") -> Document:
    """Open a PDF from its bytes; ToolError for corrupt or password-protected files, and
    ``too_large`` when :func:`atoll.formats.pdf_bounds.check_pdf` refuses it (a stream or image
    bomb; a file version that passed is not scanned again)."""
    try:
        document = pymupdf.open(stream=source.data, filetype="pdf")
        document.page_count  # noqa: B018 - a damaged page tree raises here, not later
    except Exception as exc:
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a readable PDF ({type(exc).__name__})",
            argument=argument,
        ) from None
    if document.needs_pass:
        document.close()
        raise ToolError(
            ErrorCode.unsupported,
            f"{argument}: {virtual} is password-protected; it cannot be read without the password",
            argument=argument,
        )
    if document.page_count == 0:
        document.close()
        raise ToolError(ErrorCode.bad_data, f"{argument}: {virtual} has no pages", argument=argument)
    try:
        check_pdf(document, virtual, key=("pdf", source.key, source.stamp))
    except bounds.InputTooLarge as exc:
        document.close()
        raise ToolError(exc.code, f"{argument}: {exc.message}", argument=argument) from None
    return document


def parse_pages(pages: str | int | list[int] | None, count: int, *, argument: str = "pages") -> list[int]:
    """1-based page numbers from '1-3,7', 5, [1, 2] or None/'all' (every page); ToolError when out of range."""
    if pages is None or (isinstance(pages, str) and pages.strip().lower() in ("", "all")):
        return list(range(1, count + 1))
    chosen: list[int] = []
    if isinstance(pages, bool):
        raise ToolError(ErrorCode.invalid_argument, f"{argument}: expected page numbers", argument=argument)
    if isinstance(pages, int):
        chosen = [pages]
    elif isinstance(pages, list):
        chosen = list(pages)
    else:
        for part in str(pages).replace(" ", "").split(","):
            match = re.fullmatch(r"(\d+)(?:-(\d*))?", part)
            if not match:
                raise ToolError(
                    ErrorCode.invalid_argument,
                    f"{argument}: {pages!r} is not like '1-3,7'",
                    argument=argument,
                )
            start = int(match.group(1))
            if match.group(2) is None:
                chosen.append(start)
            else:
                end = int(match.group(2)) if match.group(2) else count
                if end < start:
                    raise ToolError(
                        ErrorCode.invalid_argument,
                        f"{argument}: range {part!r} ends before it starts",
                        argument=argument,
                    )
                chosen.extend(range(start, min(end, count) + 1) if start <= count else [start])
    bad = [p for p in chosen if not isinstance(p, int) or p < 1 or p > count]
    if bad:
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{argument}: page {bad[0]} does not exist (the PDF has {count} pages)",
            argument=argument,
        )
    return list(dict.fromkeys(chosen))  # each page once, in the order asked
