"""Reading bounds of atoll.formats: package scan, streamed xlsx parts, PDF streams.

Each bomb is small, with the limit it must cross lowered to match, so every test runs in
well under a second; the full-size figures are in docs/security.md (benchmarks/bombs.py).
"""

from __future__ import annotations

import dataclasses
import io
import time
import tracemalloc
import zipfile

import pytest

from atoll.formats import bounds
from atoll.formats.bounds import InputTooLarge, check_package
from atoll.formats.pdf_bounds import check_pdf
from atoll.formats.xlsx import XlsxReader
from atoll.testing import bombs
from tests.grader.factories import docx, pdf, xlsx


@pytest.fixture
def limits(monkeypatch):
    """``limits(field=value, ...)``: lower the limits in force for this test."""

    def lower(**changes: int) -> bounds.ReadLimits:
        chosen = dataclasses.replace(bounds.LIMITS, **changes)
        monkeypatch.setattr(bounds, "LIMITS", chosen)
        return chosen

    return lower


# -- Office packages ------------------------------------------------------------------------


def test_real_office_files_pass_the_scan():
    check_package(docx(["Quarterly memo", "Revenue grew."], table=[["a", "b"]]), "memo.docx")
    check_package(xlsx({"Data": [[1, 2], [3, 4]]}), "book.xlsx")


def test_a_package_past_the_tag_limit_is_refused_naming_the_file_and_limit(limits):
    limits(max_xml_tags=50_000)
    with pytest.raises(InputTooLarge) as caught:
        check_package(bombs.docx_paragraph_bomb(10_000), "/Reports/bomb.docx")
    assert caught.value.code == "too_large"
    assert (
        str(caught.value)
        == "/Reports/bomb.docx: its XML holds more than 50000 tags (limit 50000 tags per file)"
    )
    # Streamed workbooks do not count tags (their rows are capped instead).
    check_package(bombs.xlsx_row_bomb(20_000), "book.xlsx", tree=False)


def test_unpacked_bytes_are_counted_while_inflating(limits):
    limits(max_unpacked_bytes=4 << 20, max_xml_part_bytes=64 << 20)
    data = bombs.docx_unpacked_bomb(6 << 20)
    with pytest.raises(
        InputTooLarge, match=r"bomb\.docx: unpacks to \d+ bytes \(limit 4194304 bytes unpacked\)"
    ):
        check_package(data, "bomb.docx")


def test_one_xml_part_past_its_limit_is_refused(limits):
    limits(max_xml_part_bytes=1 << 20)
    with pytest.raises(InputTooLarge, match=r"part word/document\.xml unpacks to more than 1048576 bytes"):
        check_package(bombs.docx_unpacked_bomb(2 << 20), "big.docx")


def test_a_member_whose_header_understates_its_size_is_not_inflated_past_it(limits):
    """The header says 1 byte; the member inflates to 64 MiB. Trusting the header (summing
    declared sizes) lets it through to the library, whose ``read()`` inflates all 64 MiB in
    one call before zipfile cuts it at the declared size; the scan inflates 1 MiB at a time
    and stops at the CRC check."""
    limits(max_unpacked_bytes=32 << 20)
    lying = bombs.pptx_with_media_bomb(64 << 20, lie=True)
    assert sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(lying)).infolist()) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32 for file 'ppt/media/image99.png'"):
            check_package(lying, "deck.pptx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_a_lying_workbook_part_is_read_a_piece_at_a_time():
    """The same lie in xl/styles.xml, read whole by the xlsx reader (styles, workbook.xml)."""
    from atoll.formats.xlsx import read_part

    out = io.BytesIO()
    with (
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("xl/styles.xml", "w", force_zip64=True) as member,
    ):
        for _ in range(64):
            member.write(b" " * (1 << 20))
    lying = zipfile.ZipFile(io.BytesIO(bombs.lie_about_sizes(out.getvalue(), "xl/styles.xml")))
    tracemalloc.start()
    try:
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
            read_part(lying, "xl/styles.xml", "/book.xlsx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


@pytest.mark.parametrize(
    "build",
    [bombs.docx_billion_laughs, bombs.docx_quadratic_blowup],
    ids=["billion_laughs", "quadratic_blowup"],
)
def test_entity_declarations_are_refused(build):
    with pytest.raises(InputTooLarge, match=r"word/document\.xml declares a DTD"):
        check_package(build(), "laughs.docx")


def test_a_dtd_in_utf16_is_refused_too():
    prolog = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE w:document [<!ENTITY a "aaaa">]>'
    body = "<w:p/>"
    package = bombs.docx_with_body(b"")
    members = {
        i.filename: zipfile.ZipFile(io.BytesIO(package)).read(i)
        for i in zipfile.ZipFile(io.BytesIO(package)).infolist()
    }
    xml = members["word/document.xml"].decode()
    members["word/document.xml"] = (prolog + xml.replace("<w:body>", "<w:body>" + body)).encode("utf-16")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(InputTooLarge, match="declares a DTD"):
        check_package(out.getvalue(), "utf16.docx")


def _docx_with_document_xml(xml: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(bombs.docx_with_body(b"")))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(
                info.filename, xml if info.filename == "word/document.xml" else source.read(info)
            )
    return out.getvalue()


def test_a_dtd_after_comments_and_instructions_is_found():
    xml = (
        b'<?xml version="1.0"?><!-- <w:document> in a comment --><?pi x?>\n<!DOCTYPE w [<!ENTITY a "b">]><w/>'
    )
    with pytest.raises(InputTooLarge, match="declares a DTD"):
        check_package(_docx_with_document_xml(xml), "late.docx")
    check_package(_docx_with_document_xml(b'<?xml version="1.0"?><!-- a comment --><w:document/>'), "ok.docx")


def test_a_foreign_encoding_is_refused():
    """UTF-7 would spell ``<!DOCTYPE`` as ``+ADw-!DOCTYPE``."""
    xml = b'<?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE w +AFs-+ADw-!ENTITY a "b"+AD4-+AF0-+AD4-<w/>'
    with pytest.raises(InputTooLarge, match="declares encoding 'UTF-7'"):
        check_package(_docx_with_document_xml(xml), "utf7.docx")


def test_a_prolog_longer_than_its_first_mebibyte_is_refused():
    xml = b"<!--" + b" " * (2 << 20) + b"--><!DOCTYPE w [<!ENTITY a 'b'>]><w/>"
    with pytest.raises(InputTooLarge, match="has an XML prolog longer than 1048576 bytes"):
        check_package(_docx_with_document_xml(xml), "long-prolog.docx")


def test_a_package_that_passed_is_not_scanned_again(limits):
    data = bombs.docx_paragraph_bomb(1_000)
    check_package(data, "ok.docx", key=("ok.docx", 1))
    limits(max_xml_tags=100)
    check_package(data, "ok.docx", key=("ok.docx", 1))  # remembered
    with pytest.raises(InputTooLarge):
        check_package(data, "ok.docx", key=("ok.docx", 2))  # another version


def test_a_zip_directory_of_too_many_entries_is_refused_before_it_is_parsed(limits):
    """zipfile builds an object per directory entry before anyone can count them: 50,000
    entries are refused from the end record, with a few MiB traced."""
    limits(max_members=1_000)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for index in range(50_000):
            archive.writestr(zipfile.ZipInfo(f"p/{index}.xml"), b"")
    data = out.getvalue()
    tracemalloc.start()
    try:
        with pytest.raises(InputTooLarge, match=r"^many\.docx: its zip directory holds 50000 entries"):
            check_package(data, "many.docx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    with pytest.raises(InputTooLarge, match="its zip directory holds 50000 entries"):
        XlsxReader(io.BytesIO(data), name="/many.xlsx")


def test_too_many_parts_are_refused(limits):
    import struct

    limits(max_members=10)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for index in range(11):
            archive.writestr(f"customXml/item{index}.xml", "<a/>")
    data = out.getvalue()
    with pytest.raises(
        InputTooLarge, match=r"its zip directory holds 11 entries in \d+ bytes \(limit 10 parts\)"
    ):
        check_package(data, "many.docx")
    # An end record that says 1 entry: zipfile reads the directory by its size, and counts 11.
    lying = data[:-14] + struct.pack("<HH", 1, 1) + data[-10:]
    assert len(zipfile.ZipFile(io.BytesIO(lying)).infolist()) == 11
    with pytest.raises(InputTooLarge, match=r"has 11 parts \(limit 10\)"):
        check_package(lying, "many.docx")


# -- the streamed xlsx reader ---------------------------------------------------------------


def _read_all(data: bytes, name: str) -> list:
    with XlsxReader(io.BytesIO(data), name=name) as reader:
        return list(reader.cells(reader.sheets[0], 1, 1, None, None))


def test_reading_a_large_sheet_in_small_pieces_is_linear():
    """iterparse reads the sheet's first 8 MiB (kept in memory) in small pieces: copying
    the rest of that head on every read made a 259 KiB workbook take minutes."""
    from atoll.formats.xlsx import _Chain

    head = b"x" * (16 << 20)
    chain = _Chain(head, io.BytesIO(b"tail"))
    began = time.process_time()
    pieces = []
    while piece := chain.read(256):
        pieces.append(piece)
    assert time.process_time() - began < 2.0  # copying the rest each time: ~15 s
    assert b"".join(pieces) == head + b"tail"


def test_a_sheet_past_the_part_limit_is_refused_while_streaming(limits):
    limits(max_xml_part_bytes=1 << 20)
    data = bombs.xlsx_row_bomb(100_000)  # ~2.6 MiB sheet
    with (
        XlsxReader(io.BytesIO(data), name="/rows.xlsx") as reader,
        pytest.raises(
            InputTooLarge,
            match=r"/rows\.xlsx: part xl/worksheets/sheet1\.xml unpacks to 26\d{5} bytes \(limit 1048576 per XML part\)",
        ),
    ):
        list(reader.cells(reader.sheets[0], 1, 1, None, None))


def test_a_workbook_of_many_parts_each_under_the_part_limit_is_refused(limits):
    """Parts are read lazily (dimensions scan whole sheets); their sum is capped up front."""
    limits(max_unpacked_bytes=4 << 20, max_xml_part_bytes=2 << 20)
    sheet = bombs.xlsx_row_bomb(60_000)  # ~1.6 MiB sheet
    source = zipfile.ZipFile(io.BytesIO(sheet))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info))
        for copy in range(3):
            archive.writestr(f"xl/worksheets/copy{copy}.xml", source.read("xl/worksheets/sheet1.xml"))
    with pytest.raises(
        InputTooLarge, match=r"^/many\.xlsx: unpacks to \d+ bytes \(limit 4194304 bytes unpacked\)"
    ):
        XlsxReader(io.BytesIO(out.getvalue()), name="/many.xlsx")


def test_rows_walked_in_one_read_are_capped(limits):
    limits(max_sheet_rows=5_000)
    data = bombs.xlsx_row_bomb(6_000)
    with XlsxReader(io.BytesIO(data), name="/rows.xlsx") as reader:
        assert len(list(reader.cells(reader.sheets[0], 1, 1, 4_000, None))) == 4_000
    with (
        XlsxReader(io.BytesIO(data), name="/rows.xlsx") as reader,
        pytest.raises(
            InputTooLarge, match=r"/rows\.xlsx: more than 5000 rows to read \(limit 5000 per read\)"
        ),
    ):
        list(reader.cells(reader.sheets[0], 1, 1, None, None))


def test_repeated_row_numbers_count_as_the_next_rows():
    """``<row r="1">`` a thousand times cannot keep a window's walk going forever."""
    sheet = b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
    sheet += b'<row r="1"><c r="A1"><v>7</v></c></row>' * 1_000 + b"</sheetData></worksheet>"
    with XlsxReader(io.BytesIO(bombs.xlsx_with_sheet([sheet])), name="/same.xlsx") as reader:
        cells = list(reader.cells(reader.sheets[0], 1, 1, 10, None))
    assert [cell.row for cell in cells] == list(range(1, 11))


def test_shared_strings_are_capped(limits):
    limits(max_shared_strings=1_000)
    with pytest.raises(InputTooLarge, match=r"/s\.xlsx: more than 1000 shared strings \(limit 1000\)"):
        _read_all(bombs.xlsx_shared_strings_bomb(2_000), "/s.xlsx")


def test_deep_nesting_is_not_parsed():
    """libxml2 stops at depth 256 unless ``huge_tree`` is on (the reader had it on)."""
    from lxml import etree

    sheet = [
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>',
        b'<row r="1"><c r="A1" t="inlineStr"><is>' + b"<r>" * 1_000 + b"<t>x</t>" + b"</r>" * 1_000,
        b"</is></c></row></sheetData></worksheet>",
    ]
    with pytest.raises(etree.XMLSyntaxError, match="depth"):
        _read_all(bombs.xlsx_with_sheet(sheet), "/deep.xlsx")


# -- PDF ------------------------------------------------------------------------------------


def _open(data: bytes):
    import pymupdf

    return pymupdf.open(stream=data, filetype="pdf")


def test_real_pdfs_pass_the_stream_scan():
    with _open(pdf(["page one", "page two"])) as document:
        check_pdf(document, "report.pdf")


def test_a_content_stream_bomb_is_refused_before_any_page_is_read(limits):
    limits(max_pdf_stream_bytes=1 << 20)
    document = _open(bombs.pdf_stream_bomb(4 << 20))
    with (
        document,
        pytest.raises(InputTooLarge, match=r"bomb\.pdf: stream 4 decodes to more than 1048576 bytes"),
    ):
        check_pdf(document, "bomb.pdf")


def test_a_doubly_deflated_stream_is_decoded_through_both_stages(limits):
    """FlateDecode twice: the first stage is tiny, the second one explodes."""
    import zlib

    limits(max_pdf_stream_bytes=1 << 20)
    inner = zlib.compress(b"(x) Tj " * (600_000), 9)
    outer = zlib.compress(inner, 9)
    assert len(inner) < 1 << 20
    data = bombs.pdf_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            bombs.pdf_stream(outer, b"/Filter [/FlateDecode /FlateDecode]"),
        ]
    )
    with _open(data) as document, pytest.raises(InputTooLarge, match="stream 4 decodes to more than"):
        check_pdf(document, "twice.pdf")


def test_all_streams_together_are_capped(limits):
    limits(max_pdf_stream_bytes=8 << 20, max_pdf_unpacked_bytes=2 << 20)
    document = _open(bombs.pdf_stream_bomb(3 << 20))
    with document, pytest.raises(InputTooLarge, match=r"its streams decode to more than 2097152 bytes"):
        check_pdf(document, "sum.pdf")


def test_an_image_too_large_to_render_is_refused(limits):
    limits(max_pdf_image_pixels=1_000_000)
    data = bombs.pdf_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
            bombs.pdf_stream(
                b"\0" * 16,
                b"/Type /XObject /Subtype /Image /Width 2000 /Height 2000 /BitsPerComponent 8 /ColorSpace /DeviceGray",
            ),
        ]
    )
    with _open(data) as document, pytest.raises(InputTooLarge, match=r"object 4 is a 2000x2000 image"):
        check_pdf(document, "image.pdf")


def test_a_pdf_that_passed_is_not_scanned_again(limits):
    with _open(bombs.pdf_stream_bomb(2 << 20)) as document:
        check_pdf(document, "ok.pdf", key=("ok.pdf", 1))
        limits(max_pdf_stream_bytes=1 << 20)
        check_pdf(document, "ok.pdf", key=("ok.pdf", 1))  # remembered
        with pytest.raises(InputTooLarge):
            check_pdf(document, "ok.pdf", key=("ok.pdf", 2))  # another version


def test_limits_can_be_set_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATOLL_READ_MAX_XML_TAGS", "123")
    assert bounds.ReadLimits.from_environment().max_xml_tags == 123
    monkeypatch.setenv("ATOLL_READ_MAX_XML_TAGS", "many")
    with pytest.raises(ValueError, match="ATOLL_READ_MAX_XML_TAGS: 'many' is not an integer"):
        bounds.ReadLimits.from_environment()


def test_ocr_refuses_a_page_too_large_to_render():
    """A 200-inch page at OCR's 300 dpi is 3.6 G pixels (a 3.6 GB grey pixmap)."""
    from atoll.formats.pdf import Extractor, OcrError, PdfSource

    data = bombs.pdf_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 14400 14400] >>",
        ]
    )
    with _open(data) as document, pytest.raises(OcrError, match=r"page 1 renders to \d+ pixels at 300 dpi"):
        Extractor().ocr(document[0], PdfSource("big.pdf", 1, data), 1)
