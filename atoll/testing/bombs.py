"""Hostile office, PDF and XML files for the reading-bound tests (grader, servers, formats).

Each factory builds a real file that a well-formed reader opens, scaled by its arguments: the
tests use small instances that still cross the limits; ``python -m atoll.testing.bombs DIR`` writes
the full-size ones the security docs measured (an 800 KiB docx that unpacks to ~800 MiB, a
~260 KiB workbook whose one sheet is ~70 MiB of cells, ...). Members are written in streamed
chunks, so building a bomb never holds its unpacked size in memory.
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_OFFICE_DOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_CT = "http://schemas.openxmlformats.org/package/2006/content-types"


def _zip(members: Iterable[tuple[str, Iterable[bytes] | bytes]]) -> bytes:
    """A deflated zip of ``members`` (bytes, or chunks streamed into the member)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, content in members:
            if isinstance(content, bytes):
                archive.writestr(name, content)
                continue
            with archive.open(name, "w", force_zip64=True) as member:
                for chunk in content:
                    member.write(chunk)
    return out.getvalue()


def _repeat(unit: bytes, count: int, *, head: bytes = b"", tail: bytes = b"") -> Iterable[bytes]:
    yield head
    block = unit * max(1, (1 << 20) // len(unit))
    per_block = len(block) // len(unit)
    full, rest = divmod(count, per_block)
    for _ in range(full):
        yield block
    yield unit * rest
    yield tail


def _content_types(main: str, content_type: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="{_CT}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/{main}" ContentType="{content_type}"/></Types>'
    ).encode()


def _package_rels(main: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="{_PKG_RELS}">'
        f'<Relationship Id="rId1" Type="{_OFFICE_DOC}" Target="{main}"/></Relationships>'
    ).encode()


def docx_with_body(body: Iterable[bytes] | bytes, *, prolog: bytes = b"") -> bytes:
    """A docx whose ``word/document.xml`` body is ``body`` (``prolog`` goes before the root)."""
    head = prolog + f'<w:document xmlns:w="{_W}" xmlns:r="{_R}"><w:body>'.encode()
    tail = b"</w:body></w:document>"
    chunks = [body] if isinstance(body, bytes) else body
    main = "word/document.xml"
    content_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    return _zip(
        [
            ("[Content_Types].xml", _content_types(main, content_type)),
            ("_rels/.rels", _package_rels(main)),
            (main, [head, *chunks, tail]),
        ]
    )


def docx_paragraph_bomb(paragraphs: int) -> bytes:
    """A docx of ``paragraphs`` one-run paragraphs (~30 bytes each unpacked, ~1,000:1 packed):
    800,000 paragraphs make an ~800 KiB file of ~24 MiB XML that python-docx holds as 2.4 M
    elements; 28 M make the issue's 800 KiB-that-unpacks-to-800 MiB."""
    return docx_with_body(_repeat(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>", paragraphs))


def docx_unpacked_bomb(unpacked_bytes: int) -> bytes:
    """A docx whose document.xml is ``unpacked_bytes`` of empty paragraphs (``<w:p/>``)."""
    return docx_with_body(_repeat(b"<w:p/>", unpacked_bytes // 6))


def billion_laughs(levels: int = 9, fanout: int = 10) -> bytes:
    """The classic entity-expansion prolog (``fanout ** levels`` laughs once expanded)."""
    lines = [b'<!DOCTYPE w:document [<!ENTITY lol0 "lol">']
    for level in range(1, levels + 1):
        refs = b"".join(b"&lol%d;" % (level - 1) for _ in range(fanout))
        lines.append(b'<!ENTITY lol%d "%s">' % (level, refs))
    lines.append(b"]>")
    return b"".join(lines)


def docx_billion_laughs() -> bytes:
    """A docx whose document.xml declares nested entities and uses the last one in a run."""
    laughs = b"<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>"
    return docx_with_body(laughs, prolog=billion_laughs())


def docx_quadratic_blowup(entity_bytes: int = 100_000, uses: int = 10_000) -> bytes:
    """One large entity used many times (quadratic blowup: no nesting to detect)."""
    prolog = b'<!DOCTYPE w:document [<!ENTITY a "' + b"a" * entity_bytes + b'">]>'
    return docx_with_body(b"<w:p><w:r><w:t>" + b"&a;" * uses + b"</w:t></w:r></w:p>", prolog=prolog)


def docx_deep_nesting(depth: int) -> bytes:
    """A docx with ``depth`` nested smart tags around one run (deep trees, recursion)."""
    return docx_with_body(
        [b"<w:p>", b"<w:smartTag>" * depth, b"<w:r><w:t>x</w:t></w:r>", b"</w:smartTag>" * depth, b"</w:p>"]
    )


def xlsx_with_sheet(sheet: Iterable[bytes], *, shared_strings: Iterable[bytes] | None = None) -> bytes:
    """A one-sheet xlsx whose ``xl/worksheets/sheet1.xml`` is ``sheet`` (streamed)."""
    main = "xl/workbook.xml"
    content_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
    workbook = (
        f'<workbook xmlns="{_S}" xmlns:r="{_R}"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/>'
        "</sheets></workbook>"
    ).encode()
    rels = (
        f'<Relationships xmlns="{_PKG_RELS}"><Relationship Id="rId1" '
        f'Type="{_R}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
    ).encode()
    members: list[tuple[str, Iterable[bytes] | bytes]] = [
        ("[Content_Types].xml", _content_types(main, content_type)),
        ("_rels/.rels", _package_rels(main)),
        (main, workbook),
        ("xl/_rels/workbook.xml.rels", rels),
        ("xl/worksheets/sheet1.xml", sheet),
    ]
    if shared_strings is not None:
        members.append(("xl/sharedStrings.xml", shared_strings))
    return _zip(members)


def xlsx_row_bomb(rows: int) -> bytes:
    """An xlsx of ``rows`` identical one-cell rows without ``r`` attributes (~27 bytes each
    unpacked): 2.7 M rows make the issue's ~260 KiB workbook of a ~70 MiB sheet."""
    head = f'<worksheet xmlns="{_S}"><sheetData>'.encode()
    return xlsx_with_sheet(
        _repeat(b"<row><c><v>1</v></c></row>", rows, head=head, tail=b"</sheetData></worksheet>")
    )


def xlsx_shared_strings_bomb(strings: int) -> bytes:
    """An xlsx whose shared-strings table holds ``strings`` entries (read in full on first use)."""
    sheet = f'<worksheet xmlns="{_S}"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c></row>'
    table = _repeat(b"<si><t>x</t></si>", strings, head=f'<sst xmlns="{_S}">'.encode(), tail=b"</sst>")
    return xlsx_with_sheet([sheet.encode(), b"</sheetData></worksheet>"], shared_strings=table)


def pptx_with_media_bomb(unpacked_bytes: int, *, lie: bool = False) -> bytes:
    """A real one-slide pptx with an extra ``ppt/media/image99.png`` part of
    ``unpacked_bytes`` zeros (~1,000:1). With ``lie`` the member's declared sizes in both
    zip headers are rewritten to 1 byte (a reader trusting them is fooled)."""
    from pptx import Presentation

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    buffer = io.BytesIO()
    deck.save(buffer)
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    members: list[tuple[str, Iterable[bytes] | bytes]] = [
        (i.filename, source.read(i)) for i in source.infolist()
    ]
    members.append(("ppt/media/image99.png", _repeat(b"\0" * 4096, unpacked_bytes // 4096)))
    data = _zip(members)
    return lie_about_sizes(data, "ppt/media/image99.png") if lie else data


def lie_about_sizes(data: bytes, name: str) -> bytes:
    """``data`` with member ``name``'s uncompressed size declared as 1 in its local header,
    its central directory entry and their zip64 extra fields."""
    import struct

    out = bytearray(data)
    encoded = name.encode()
    for signature, size_at, name_len_at, extra_len_at, header_len in (
        (b"PK\x03\x04", 22, 26, 28, 30),
        (b"PK\x01\x02", 24, 28, 30, 46),
    ):
        at = out.find(signature + b"")
        while at >= 0:
            name_len = struct.unpack_from("<H", out, at + name_len_at)[0]
            if out[at + header_len : at + header_len + name_len] == encoded:
                if struct.unpack_from("<I", out, at + size_at)[0] != 0xFFFFFFFF:
                    struct.pack_into("<I", out, at + size_at, 1)
                extra_at = at + header_len + name_len
                extra_end = extra_at + struct.unpack_from("<H", out, at + extra_len_at)[0]
                while extra_at + 4 <= extra_end:
                    tag, length = struct.unpack_from("<HH", out, extra_at)
                    if tag == 1 and length >= 8:  # zip64: uncompressed size first
                        struct.pack_into("<Q", out, extra_at + 4, 1)
                    extra_at += 4 + length
            at = out.find(signature, at + 4)
    return bytes(out)


def pdf_page_count_lie(claimed: int) -> bytes:
    """A one-page PDF whose page tree claims ``claimed`` pages (``/Count``)."""
    return pdf_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % claimed,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
        ]
    )


def pdf_many_pages(pages: int) -> bytes:
    """A PDF of ``pages`` real pages sharing one content stream (a few dozen bytes each)."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        pdf_stream(b"BT /F1 12 Tf 72 720 Td (page) Tj ET"),
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    objects.extend(page for _ in range(pages))
    return pdf_objects(objects)


def pdf_stream_bomb(unpacked_bytes: int, *, text: bool = True) -> bytes:
    """A one-page PDF whose content stream inflates to ``unpacked_bytes`` (text-showing
    operators with ``text``, else spaces)."""
    import zlib

    unit = b"(x) Tj " if text else b" " * 7
    compressor = zlib.compressobj(9)
    chunks = [compressor.compress(b"BT /F1 1 Tf ")]
    block = unit * ((1 << 20) // len(unit))
    for _ in range(unpacked_bytes // len(block)):
        chunks.append(compressor.compress(block))
    chunks.append(compressor.compress(b" ET"))
    chunks.append(compressor.flush())
    return pdf_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
            pdf_stream(b"".join(chunks), b"/Filter /FlateDecode"),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )


def pdf_stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def pdf_objects(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


FULL_SIZE = {
    "docx_8m_paragraphs.docx": lambda: docx_paragraph_bomb(8_000_000),
    "docx_unpacks_800mib.docx": lambda: docx_unpacked_bomb(800 << 20),
    "docx_billion_laughs.docx": docx_billion_laughs,
    "docx_quadratic_blowup.docx": docx_quadratic_blowup,
    "docx_deep_nesting.docx": lambda: docx_deep_nesting(100_000),
    "xlsx_4m_rows.xlsx": lambda: xlsx_row_bomb(4_000_000),
    "xlsx_2m_shared_strings.xlsx": lambda: xlsx_shared_strings_bomb(2_000_000),
    "pptx_media_2gib_lying.pptx": lambda: pptx_with_media_bomb(2 << 30, lie=True),
    "pdf_count_1e9.pdf": lambda: pdf_page_count_lie(10**9),
    "pdf_100k_pages.pdf": lambda: pdf_many_pages(100_000),
    "pdf_stream_1gib.pdf": lambda: pdf_stream_bomb(1 << 30),
}


if __name__ == "__main__":  # python -m atoll.testing.bombs OUT_DIR [NAME ...]
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, build in FULL_SIZE.items():
        if len(sys.argv) > 2 and file_name not in sys.argv[2:]:
            continue
        content = build()
        (folder / file_name).write_bytes(content)
        print(f"{file_name}: {len(content):,} bytes")
