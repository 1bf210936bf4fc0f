"""Documents domain code on hand-written WordprocessingML: identifiers and formatting-preserving edits."""

from __future__ import annotations

import docx
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn

from atoll.formats.docx.elements import paragraph_text, runs_of
from atoll.formats.docx.reading import read_blocks
from mcp_servers._core.errors import ToolError
from mcp_servers.documents.body import resolve
from mcp_servers.documents.text_edit import set_paragraph_text

W = nsdecls("w")


def paragraph(xml_runs: str):
    return parse_xml(f"<w:p {W}>{xml_runs}</w:p>")


def run(text: str, bold: bool = False) -> str:
    props = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r>{props}<w:t xml:space="preserve">{text}</w:t></w:r>'


def texts_and_bold(p) -> list[tuple[str, bool]]:
    result = []
    for r in runs_of(p):
        text = "".join(t.text or "" for t in r.iter(qn("w:t")))
        result.append((text, r.find(f"{qn('w:rPr')}/{qn('w:b')}") is not None))
    return result


def test_word_level_edit_keeps_each_run():
    p = paragraph(run("Total: ") + run("1,200", bold=True) + run(" units"))
    set_paragraph_text(p, "Total: 1,350 units")
    assert texts_and_bold(p) == [("Total: ", False), ("1,350", True), (" units", False)]


def test_insertion_takes_formatting_of_preceding_text():
    p = paragraph(run("Alpha", bold=True) + run(" omega"))
    set_paragraph_text(p, "Alpha beta omega")
    assert paragraph_text(p) == "Alpha beta omega"
    assert texts_and_bold(p)[0] == ("Alpha", True)


def test_rewrite_goes_into_the_first_run_and_drops_emptied_runs():
    p = paragraph(run("Completely ", bold=True) + run("different words here"))
    set_paragraph_text(p, "Nothing in common at all, xyz")
    assert texts_and_bold(p) == [("Nothing in common at all, xyz", True)]


def test_tabs_breaks_and_images_survive():
    drawing = f"<w:r><w:drawing><wp:inline {nsdecls('wp')}/></w:drawing></w:r>"
    p = paragraph(run("A") + "<w:r><w:tab/></w:r>" + run("B") + drawing + run("C"))
    assert paragraph_text(p) == "A\tBC"
    set_paragraph_text(p, "A\tBX")
    assert paragraph_text(p) == "A\tBX"
    assert len(p.findall(f".//{qn('w:drawing')}")) == 1
    set_paragraph_text(p, "line one\nline two")
    assert paragraph_text(p) == "line one\nline two" and p.findall(f".//{qn('w:br')}")


def test_empty_paragraph_gets_a_run():
    p = paragraph("")
    set_paragraph_text(p, "Now filled")
    assert paragraph_text(p) == "Now filled"


def test_hyperlink_runs_are_editable_and_stay_linked():
    p = paragraph(
        run("See ") + f'<w:hyperlink {nsdecls("r")} r:id="rId9">' + run("the report") + "</w:hyperlink>"
    )
    assert [r for r in runs_of(p)][1].getparent().tag == qn("w:hyperlink")
    set_paragraph_text(p, "See the final report")
    link = p.find(qn("w:hyperlink"))
    assert "".join(t.text for t in link.iter(qn("w:t"))) == "the final report"


def test_deleted_text_is_not_edited():
    p = paragraph(
        run("Keep ")
        + f'<w:del {W} w:id="1" w:author="A"><w:r><w:delText>old</w:delText></w:r></w:del>'
        + run("end")
    )
    assert paragraph_text(p) == "Keep end"
    set_paragraph_text(p, "Keep the end")
    assert paragraph_text(p) == "Keep the end"
    assert p.find(f".//{qn('w:delText')}").text == "old"


@pytest.fixture
def nested_document():
    document = docx.Document()
    document.add_paragraph("first")
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "outer"
    inner = outer.cell(0, 1).add_table(rows=1, cols=1)
    inner.cell(0, 0).text = "inner"
    document.add_paragraph("second")
    # A content control wrapping a paragraph is looked through.
    document.element.body.insert(
        len(document.element.body) - 1,
        parse_xml(
            f"<w:sdt {W}><w:sdtContent><w:p><w:r><w:t>in control</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        ),
    )
    return document


def test_identifiers_reach_nested_tables_and_content_controls(nested_document):
    target = resolve(nested_document, "body.tbl.0.r.0.c.1.tbl.0.r.0.c.0.p.0")
    assert target.kind == "paragraph" and paragraph_text(target.element) == "inner"
    assert paragraph_text(resolve(nested_document, "body.p.2").element) == "in control"
    ids = [(b["id"], b.get("text")) for b in read_blocks(nested_document)]
    assert ids == [
        ("body.p.0", "first"),
        ("body.tbl.0", None),
        ("body.p.1", "second"),
        ("body.p.2", "in control"),
    ]


@pytest.mark.parametrize(
    ("identifier", "code"),
    [
        ("body.p", "invalid_argument"),
        ("body.p.x", "invalid_argument"),
        ("body.p.0.r.0.r.0", "invalid_argument"),
        ("body.tbl.0.c.0", "invalid_argument"),
        ("footer.0", "invalid_argument"),
        ("body.tbl.3", "not_found"),
        ("header.s.4.p.0", "not_found"),
        ("doc.p.0", "invalid_argument"),
    ],
)
def test_malformed_identifiers_are_named(nested_document, identifier, code):
    with pytest.raises(ToolError) as info:
        resolve(nested_document, identifier)
    assert info.value.code == code and identifier in info.value.message


def test_concurrent_edits_of_one_document_lose_nothing(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from mcp_servers._core.context import ServerContext
    from mcp_servers.documents.files import DocumentFiles
    from mcp_servers.documents.tools_write import add_content_text

    root = tmp_path / "fs"
    root.mkdir()
    docx.Document().save(str(root / "shared.docx"))
    files = DocumentFiles(ServerContext.create(root, tmp_path / "apps"))

    def add(number: int) -> None:
        add_content_text(files, "/shared.docx", "body", f"line {number}", "end")

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(add, range(12)))
    texts = {p.text for p in docx.Document(str(root / "shared.docx")).paragraphs}
    assert {f"line {n}" for n in range(12)} <= texts


def test_reads_show_hyperlink_targets():
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    from atoll.formats.docx.reading import render_block

    document = docx.Document()
    rel_id = document.part.relate_to("https://example.com/report", RT.HYPERLINK, is_external=True)
    p = document.add_paragraph("See ")
    p._p.append(
        parse_xml(f'<w:hyperlink {W} {nsdecls("r")} r:id="{rel_id}">{run("the report")}</w:hyperlink>')
    )
    block = read_blocks(document)[0]
    assert block["text"] == "See the report"
    assert block["links"] == [{"text": "the report", "target": "https://example.com/report"}]
    assert render_block(block).endswith("<the report: https://example.com/report>")


def test_text_boxes_are_read_once():
    from atoll.formats.docx.reading import render_block

    document = docx.Document()
    p = document.add_paragraph("Anchor")
    box = (
        f'<w:r {W} xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        '<mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent>'
        f"<w:p>{run('Boxed note')}</w:p></w:txbxContent></w:drawing></mc:Choice>"
        f"<mc:Fallback><w:pict><w:txbxContent><w:p>{run('Boxed note')}</w:p></w:txbxContent></w:pict>"
        "</mc:Fallback></mc:AlternateContent></w:r>"
    )
    p._p.append(parse_xml(box))
    block = read_blocks(document)[0]
    assert block["text"] == "Anchor" and block["text_boxes"] == ["Boxed note"]
    assert render_block(block).endswith("[text box: Boxed note]")


def test_tracked_changes_inside_table_cells_are_read():
    from atoll.formats.docx.reading import render_block

    document = docx.Document()
    table = document.add_table(rows=1, cols=1)
    cell_paragraph = table.cell(0, 0).paragraphs[0]
    cell_paragraph._p.append(parse_xml(f'<w:ins {W} w:id="5" w:author="Kim">{run("new")}</w:ins>'))
    block = read_blocks(document)[0]
    assert block["rows"] == [["new"]]
    assert block["tracked_changes"][0]["cell"] == "body.tbl.0.r.0.c.0"
    assert "| {++new++} |" in render_block(block)


def test_the_spelled_out_tag_names_are_python_docx_s():
    """The documents server names tags without python-docx (so building it imports none):
    every ``qn("p:tag")`` in its sources must give what python-docx's ``qn`` gives."""
    import re
    from pathlib import Path

    from atoll.formats.docx import names
    from mcp_servers.documents import blocks

    sources = Path(blocks.__file__).parent.glob("*.py")
    tags = {tag for source in sources for tag in re.findall(r"qn\([\"']([\w:]+)[\"']\)", source.read_text())}
    assert len(tags) > 20
    assert {tag: names.qn(tag) for tag in tags} == {tag: qn(tag) for tag in tags}
    assert {prefix: names.qn(f"{prefix}:x") for prefix in names._NAMESPACES} == {
        prefix: qn(f"{prefix}:x") for prefix in names._NAMESPACES
    }
    from docx.enum.text import WD_ALIGN_PARAGRAPH

    assert [blocks.alignment(name) for name in blocks.ALIGNMENTS] == [
        WD_ALIGN_PARAGRAPH.LEFT,
        WD_ALIGN_PARAGRAPH.CENTER,
        WD_ALIGN_PARAGRAPH.RIGHT,
        WD_ALIGN_PARAGRAPH.JUSTIFY,
    ]
