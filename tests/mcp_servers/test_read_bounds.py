"""Hostile office and PDF files through the app servers' tools: one ``too_large`` error each,
naming the file and the limit, and the server goes on serving.

Small bombs with the limits lowered to match keep these fast; one test reads a real ~100 KiB
docx bomb (1 M paragraphs) through the documents tool in a child process and measures it.
"""

from __future__ import annotations

import dataclasses

import pytest

from atoll.formats import bounds
from atoll.testing import bombs
from tests.child_memory import run_measured
from tests.grader import factories as f
from tests.mcp_servers.helpers import make_world, open_session


@pytest.fixture
def limits(monkeypatch):
    def lower(**changes: int) -> None:
        monkeypatch.setattr(bounds, "LIMITS", dataclasses.replace(bounds.LIMITS, **changes))

    return lower


@pytest.fixture
def world(tmp_path):
    return make_world(tmp_path)


def test_documents_refuse_a_docx_bomb_and_keep_serving(world, limits):
    limits(max_xml_tags=50_000)
    world.file("/bomb.docx", bombs.docx_paragraph_bomb(20_000))
    world.file("/memo.docx", f.docx(["Revenue grew 12%."]))
    with open_session("documents", world) as docs:
        error = docs.error("read_document_content", {"file_path": "/bomb.docx"})
        assert error == {
            "code": "too_large",
            "message": "file_path: /bomb.docx: its XML holds more than 50000 tags (limit 50000 tags per file)",
            "argument": "file_path",
        }
        blocks = docs.ok("read_document_content", {"file_path": "/memo.docx"})["blocks"]
        assert any(block["text"] == "Revenue grew 12%." for block in blocks)


def test_documents_refuse_entity_declarations(world):
    world.file("/laughs.docx", bombs.docx_billion_laughs())
    with open_session("documents", world) as docs:
        error = docs.error("get_document_overview", {"file_path": "/laughs.docx"})
    assert error["code"] == "too_large"
    assert error["message"].startswith("file_path: /laughs.docx: part word/document.xml declares a DTD")


def test_too_many_paragraphs_is_one_too_large_error(world, limits):
    """Raised inside the tool body (after the package opened): the tools' error style, not
    ``internal``."""
    limits(max_blocks=500)
    world.file("/long.docx", bombs.docx_paragraph_bomb(600))
    with open_session("documents", world) as docs:
        error = docs.error("read_document_content", {"file_path": "/long.docx"})
    assert error["code"] == "too_large"
    assert error["message"] == (
        "read_document_content: /long.docx: has more than 500 paragraphs and table cells (limit 500)"
    )


def test_presentations_refuse_a_lying_media_part_and_too_many_slides(world, limits):
    world.file("/lying.pptx", bombs.pptx_with_media_bomb(64 << 20, lie=True))
    world.file("/deck.pptx", f.pptx([("one", [], None), ("two", [], None), ("three", [], None)]))
    with open_session("presentations", world) as slides:
        error = slides.error("read_slides", {"file_path": "/lying.pptx"})
        assert (
            error["code"] == "bad_data" and "Bad CRC-32 for file 'ppt/media/image99.png'" in error["message"]
        )
        limits(max_slides=2)
        error = slides.error("read_slides", {"file_path": "/deck.pptx"})
    assert error["code"] == "too_large"
    assert error["message"] == "file_path: /deck.pptx has 3 slides (limit 2)"


def test_presentations_refuse_a_zip_bomb_member(world, limits):
    limits(max_unpacked_bytes=4 << 20)
    world.file("/bomb.pptx", bombs.pptx_with_media_bomb(8 << 20))
    with open_session("presentations", world) as slides:
        error = slides.error("read_completedeck", {"file_path": "/bomb.pptx"})
    assert error["code"] == "too_large"
    assert (
        "file_path: /bomb.pptx: unpacks to" in error["message"]
        and "(limit 4194304 bytes unpacked)" in error["message"]
    )


def test_spreadsheets_bound_reads_and_edits(world, limits):
    limits(max_shared_strings=1_000, max_xml_tags=20_000)
    world.file("/strings.xlsx", bombs.xlsx_shared_strings_bomb(2_000))
    world.file("/rows.xlsx", bombs.xlsx_row_bomb(10_000))
    with open_session("spreadsheets", world) as sheets:
        error = sheets.error("read_tab", {"file_path": "/strings.xlsx"})
        assert error == {
            "code": "too_large",
            "message": "file_path: /strings.xlsx: more than 1000 shared strings (limit 1000)",
            "argument": "file_path",
        }
        # Streamed reads do not count tags; openpyxl's full load (an edit) does.
        assert sheets.ok("read_tab", {"file_path": "/rows.xlsx", "cell_range": "A1:A3"})["rows"] == [
            [1],
            [1],
            [1],
        ]
        error = sheets.error(
            "add_content_text", {"file_path": "/rows.xlsx", "tab_index": 0, "cell": "B1", "value": 2}
        )
    assert error["code"] == "too_large"
    assert (
        error["message"]
        == "file_path: /rows.xlsx: its XML holds more than 20000 tags (limit 20000 tags per file)"
    )


def test_pdfs_refuse_a_stream_bomb_and_cut_long_reads(world, limits):
    limits(max_pdf_stream_bytes=1 << 20, max_pdf_pages=5)
    world.file("/bomb.pdf", bombs.pdf_stream_bomb(4 << 20))
    world.file("/blank.pdf", bombs.pdf_many_pages(8))
    with open_session("pdfs", world) as pdfs:
        error = pdfs.error("read_pdf_pages", {"file_path": "/bomb.pdf"})
        assert error["code"] == "too_large"
        assert error["message"] == (
            "file_path: /bomb.pdf: stream 4 decodes to more than 1048576 bytes (limit 1048576 per stream)"
        )
        read = pdfs.ok("read_pdf_pages", {"file_path": "/blank.pdf"})
        assert [page["page"] for page in read["pages"]] == [1, 2, 3, 4, 5]
        assert read["truncated"] is True and read["continuation"] == "call again with pages='6-8'"
        found = pdfs.ok("search_pdf", {"file_path": "/blank.pdf", "query": "page"})
    assert (
        found["total_matches"] == 5
        and found["note"] == "only the first 5 of 8 pages were searched (limit per call)"
    )


def test_a_broken_page_tree_is_bad_data_not_internal(world):
    world.file("/lie.pdf", bombs.pdf_page_count_lie(10**9))
    with open_session("pdfs", world) as pdfs:
        error = pdfs.error("read_pdf_pages", {"file_path": "/lie.pdf"})
    assert error["code"] == "bad_data" and error["message"].startswith(
        "file_path: /lie.pdf is not a readable PDF"
    )


def test_an_800_kib_docx_bomb_through_the_tool_stays_small_in_memory():
    result = run_measured(
        """
        import pathlib, tempfile
        from atoll.testing.bombs import docx_paragraph_bomb
        from tests.mcp_servers.helpers import make_world, open_session
        world = make_world(pathlib.Path(tempfile.mkdtemp()))
        world.file("/bomb.docx", docx_paragraph_bomb(1_000_000))
        """,
        """
        with open_session("documents", world) as docs:
            outcome = docs.error("read_document_content", {"file_path": "/bomb.docx"})["message"]
        """,
    )
    assert result["outcome"].startswith("file_path: /bomb.docx: its XML holds more than")
    assert result["peak_mib"] < 200 and result["seconds"] < 20


def test_a_bomb_written_in_place_with_its_mtime_set_back_is_scanned_again(world, limits):
    """The servers remember packages and PDFs that passed by file version. An agent can
    rewrite a file in place at the same size and put its mtime back with utime; the ctime
    in the version key moves anyway, so the bomb is scanned."""
    import os
    import zipfile

    limits(max_xml_tags=50_000)
    benign, bomb = f.docx(["Revenue grew 12%."]), bombs.docx_paragraph_bomb(20_000)
    small, large = sorted((benign, bomb), key=len)
    padded = _with_zip_comment(small, len(large) - len(small))
    benign, bomb = (padded, large) if small is benign else (large, padded)
    assert len(benign) == len(bomb)
    path = world.file("/memo.docx", benign)
    with open_session("documents", world) as docs:
        docs.ok("read_document_content", {"file_path": "/memo.docx"})
        before = os.stat(path)
        with open(path, "r+b") as handle:  # same inode, same size
            handle.write(bomb)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (os.stat(path).st_mtime_ns, os.stat(path).st_ino) == (before.st_mtime_ns, before.st_ino)
        error = docs.error("read_document_content", {"file_path": "/memo.docx"})
    assert error["code"] == "too_large" and "its XML holds more than 50000 tags" in error["message"]
    assert zipfile.is_zipfile(path)


def _with_zip_comment(data: bytes, length: int) -> bytes:
    """``data`` (a zip without a comment) grown by exactly ``length`` bytes of archive comment."""
    import struct

    assert 0 <= length <= 65_535 and data[-22:-18] == b"PK\x05\x06"
    return data[:-2] + struct.pack("<H", length) + b"x" * length


def test_a_pdf_rewritten_in_place_with_its_mtime_set_back_is_scanned_again(world, limits):
    import os

    limits(max_pdf_stream_bytes=1 << 20)
    benign, bomb = f.pdf(["Revenue grew 12%."]), bombs.pdf_stream_bomb(4 << 20)
    size = max(len(benign), len(bomb))
    benign, bomb = (
        data + b"\n%" + b"x" * (size - len(data)) for data in (benign, bomb)
    )  # a trailing comment
    path = world.file("/report.pdf", benign)
    with open_session("pdfs", world) as pdfs:
        pdfs.ok("read_pdf_pages", {"file_path": "/report.pdf"})
        before = os.stat(path)
        with open(path, "r+b") as handle:
            handle.write(bomb)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        error = pdfs.error("read_pdf_pages", {"file_path": "/report.pdf"})
    assert error["code"] == "too_large" and "decodes to more than 1048576 bytes" in error["message"]


def test_an_image_canvas_too_large_to_decode_is_refused(world, limits):
    """A few KiB of TIFF can declare a canvas that decodes to hundreds of MB; TIFF is
    converted (decoded) before sending, so its size is checked first."""
    import io

    from PIL import Image

    limits(max_image_pixels=1_000_000)
    buffer = io.BytesIO()
    Image.new("RGB", (2000, 2000)).save(buffer, "TIFF", compression="tiff_deflate")
    world.file("/scan.tif", buffer.getvalue())
    small = io.BytesIO()
    Image.new("RGB", (900, 900)).save(small, "TIFF", compression="tiff_deflate")
    world.file("/small.tif", small.getvalue())
    with open_session("filesystem", world) as fs:
        error = fs.error("read_image_file", {"file_path": "/scan.tif"})
        assert fs.ok("read_image_file", {"file_path": "/small.tif"})["width"] == 900
    assert error == {
        "code": "too_large",
        "message": "file_path: /scan.tif is a 2000x2000 image (limit 1000000 pixels)",
        "argument": "file_path",
    }


def test_a_formula_in_a_huge_workbook_is_not_handed_to_libreoffice(world, limits):
    """Reading streams a sheet, so a read counts no tags; a formula without a cached value used
    to send the whole workbook to LibreOffice, which loads all of it. Past the tag limit the
    cell says why it was not computed, naming the file and the limit, in seconds."""
    import time

    from atoll.testing.bombs import _S, _repeat, xlsx_with_sheet

    limits(max_xml_tags=20_000)
    head = f'<worksheet xmlns="{_S}"><sheetData><row r="1"><c r="A1"><f>1+1</f></c></row>'.encode()
    world.file("/formula.xlsx", xlsx_with_sheet(_repeat(b"<row><c><v>1</v></c></row>", 10_000, head=head,
                                                        tail=b"</sheetData></worksheet>")))  # fmt: skip
    with open_session("spreadsheets", world, options={"recalc": "cold"}) as sheets:
        started = time.monotonic()
        rows = sheets.ok("read_tab", {"file_path": "/formula.xlsx", "cell_range": "A1:A1"})["rows"]
        took = time.monotonic() - started
    assert rows[0][0].startswith("#NOT_COMPUTED: not recalculated:"), rows
    assert "/formula.xlsx" in rows[0][0] and "limit 20000 tags" in rows[0][0], rows
    assert took < 3.0  # a cold LibreOffice alone takes 4 s here
