"""Documents server (.docx): every tool in both modes, on real files written by python-docx."""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from typing import Any

import docx
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.shared import Inches
from PIL import Image

from mcp_servers.documents.server import SERVER
from tests.mcp_servers.helpers import make_world, open_session, text_of

MODES = ("individual", "consolidated")


class Docs:
    """Calls a documents tool by its individual name in either mode."""

    def __init__(self, session: Any, mode: str) -> None:
        self.session, self.mode = session, mode

    def _args(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.mode == "individual":
            return tool, arguments
        definition = SERVER.find(tool)
        renamed = {(f"{definition.action}_action" if k == "action" else k): v for k, v in arguments.items()}
        return "docs", {"action": definition.action, **renamed}

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.ok(*self._args(tool, arguments))

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.error(*self._args(tool, arguments))

    def text(self, tool: str, **arguments: Any) -> str:
        result = self.session.call(*self._args(tool, arguments))
        assert not result.is_error, text_of(result)
        return text_of(result)

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.session.call(*self._args(tool, arguments))


def png_bytes(width: int = 40, height: int = 20, color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def write_rich_document(path: Path, image: Path) -> None:
    """Heading, a paragraph of three differently formatted runs, a paragraph with an inline
    image between text, a table, a tracked insertion and deletion, a comment, a header."""
    document = docx.Document()
    document.add_heading("Quarterly memo", level=1)
    paragraph = document.add_paragraph()
    paragraph.add_run("Revenue grew ")
    paragraph.add_run("12%").bold = True
    paragraph.add_run(" in 2023.").italic = True
    with_image = document.add_paragraph()
    with_image.add_run("Chart: ")
    with_image.add_run().add_picture(str(image), width=Inches(2))
    with_image.add_run(" end")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([["Region", "Sales"], ["North", "100"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    tracked = document.add_paragraph()
    tracked.add_run("Price is ")
    tracked._p.append(
        parse_xml(
            f'<w:del {nsdecls("w")} w:id="91" w:author="Ann Lee" w:date="2024-03-01T09:00:00Z">'
            "<w:r><w:delText>$10</w:delText></w:r></w:del>"
        )
    )
    tracked._p.append(
        parse_xml(
            f'<w:ins {nsdecls("w")} w:id="92" w:author="Ann Lee" w:date="2024-03-01T09:00:00Z">'
            "<w:r><w:t>$12</w:t></w:r></w:ins>"
        )
    )
    commented = document.add_paragraph()
    run = commented.add_run("Needs review")
    document.add_comment(run, text="Is this final?", author="Bo Chen", initials="BC")
    document.sections[0].header.paragraphs[0].text = "Confidential"
    document.save(str(path))


@pytest.fixture(params=MODES)
def env(request, tmp_path):
    world = make_world(tmp_path)
    image = world.file("/img/red.png", png_bytes())
    world.file("/img/blue.png", png_bytes(80, 20, "blue"))
    write_rich_document(world.fs_root / "memo.docx", image)
    with open_session("documents", world, mode=request.param, options={"user_name": "Dana Ruiz"}) as session:
        yield Docs(session, request.param), world


def reopen(world, virtual: str = "/memo.docx") -> Any:
    return docx.Document(str(world.fs_root / virtual.lstrip("/")))


# --- reading ---------------------------------------------------------------------------


def test_read_is_in_document_order_with_identifiers(env):
    docs, _world = env
    data = docs.ok("read_document_content", file_path="/memo.docx")
    kinds = [(b["id"], b["type"]) for b in data["blocks"]]
    assert kinds[:5] == [
        ("body.p.0", "heading"),
        ("body.p.1", "paragraph"),
        ("body.p.2", "paragraph"),
        ("body.tbl.0", "table"),
        ("body.p.3", "paragraph"),
    ]
    assert data["blocks"][1]["text"] == "Revenue grew 12% in 2023."
    assert data["blocks"][3]["rows"] == [["Region", "Sales"], ["North", "100"]]
    assert data["blocks"][2]["images"] == ["image.0"]
    text = docs.text("read_document_content", file_path="/memo.docx")
    assert "[body.p.0] (Heading 1) # Quarterly memo" in text
    assert text.index("[body.p.2]") < text.index("[body.tbl.0]") < text.index("[body.p.3]")


def test_tracked_changes_are_readable(env):
    docs, _world = env
    block = docs.ok("read_document_content", file_path="/memo.docx")["blocks"][4]
    assert block["text"] == "Price is $12"
    assert block["marked_text"] == "Price is {--$10--}{++$12++}"
    assert {(c["type"], c["text"], c["author"]) for c in block["tracked_changes"]} == {
        ("deletion", "$10", "Ann Lee"),
        ("insertion", "$12", "Ann Lee"),
    }


def test_read_runs_and_output_cap(env):
    docs, _world = env
    data = docs.ok("read_document_content", file_path="/memo.docx", include_runs=True)
    runs = data["blocks"][1]["runs"]
    assert [(r["id"], r["text"], r.get("bold", False)) for r in runs] == [
        ("body.p.1.r.0", "Revenue grew ", False),
        ("body.p.1.r.1", "12%", True),
        ("body.p.1.r.2", " in 2023.", False),
    ]
    lines = "\n".join(f"Filler paragraph number {i} with some words." for i in range(40))
    docs.ok("add_content_text", file_path="/memo.docx", identifier="body", text=lines, position="end")
    data = docs.ok("read_document_content", file_path="/memo.docx")
    first = docs.ok("read_document_content", file_path="/memo.docx", max_chars=800)
    assert first["truncated"] and first["next_start_block"] == len(first["blocks"])
    rest = docs.ok("read_document_content", file_path="/memo.docx", start_block=first["next_start_block"])
    assert [b["id"] for b in first["blocks"] + rest["blocks"]] == [b["id"] for b in data["blocks"]]


def test_pages_of_fifty_blocks_and_explicit_breaks(env):
    docs, _world = env
    content = [{"type": "paragraph", "text": f"para {i}"} for i in range(60)]
    content[10:10] = [{"type": "page_break"}]
    docs.ok("create_document", directory="/", file_name="paged.docx", content=content)
    overview = docs.ok("get_document_overview", file_path="/paged.docx")
    assert (overview["total_pages"], overview["printed_pages"]) == (2, 2)
    second = docs.ok("read_document_content", file_path="/paged.docx", page_index=1)
    assert second["total_pages"] == 2 and [b["id"] for b in second["blocks"]][0] == "body.p.50"
    assert [b["text"] for b in second["blocks"]][-1] == "para 59"
    text = docs.text("read_document_content", file_path="/paged.docx", page_index=0)
    assert (
        text.index("[body.p.9] para 9") < text.index("--- page break ---") < text.index("[body.p.11] para 10")
    )
    assert docs.error("read_document_content", file_path="/paged.docx", page_index=5)["code"] == "not_found"


def test_overview_lists_outline_and_counts(env):
    docs, _world = env
    data = docs.ok("get_document_overview", file_path="/memo.docx")
    assert data["headings"] == [{"id": "body.p.0", "level": 1, "text": "Quarterly memo"}]
    assert (data["tables"], data["images"], data["comments"], data["tracked_changes"]) == (1, 1, 1, 2)
    assert data["sections"][0]["orientation"] == "portrait"


def test_read_image_returns_the_picture(env):
    docs, _world = env
    result = docs.call("read_image", file_path="/memo.docx", annotation="image.0")
    assert not result.is_error
    images = [block for block in result.content if getattr(block, "type", "") == "image"]
    assert len(images) == 1 and images[0].mimeType == "image/png"
    assert result.structured_content["run"] == "body.p.2.r.1"
    assert docs.error("read_image", file_path="/memo.docx", annotation="image.7")["code"] == "not_found"


def test_comments_read_add_delete(env):
    docs, world = env
    comments = docs.ok("comments", file_path="/memo.docx")["comments"]
    assert [(c["author"], c["text"], c["anchored_text"], c["anchor"]) for c in comments] == [
        ("Bo Chen", "Is this final?", "Needs review", "body.p.4")
    ]
    added = docs.ok(
        "comments", file_path="/memo.docx", action="add", identifier="body.p.1.r.1", text="Source?"
    )
    comments = docs.ok("comments", file_path="/memo.docx")["comments"]
    new = next(c for c in comments if c["comment_id"] == added["comment_id"])
    assert (new["author"], new["anchored_text"], new["anchor"]) == ("Dana Ruiz", "12%", "body.p.1")
    docs.ok("comments", file_path="/memo.docx", action="delete", comment_id=comments[0]["comment_id"])
    remaining = docs.ok("comments", file_path="/memo.docx")["comments"]
    assert [c["text"] for c in remaining] == ["Source?"]
    body_xml = reopen(world).element.body.xml
    assert body_xml.count("commentRangeStart") == 1 and body_xml.count("commentReference") == 1
    assert (
        docs.error("comments", file_path="/memo.docx", action="delete", comment_id=99)["code"] == "not_found"
    )


# --- editing text keeps formatting -------------------------------------------------------


def test_edit_paragraph_keeps_run_formatting(env):
    docs, world = env
    docs.ok(
        "edit_content_text",
        file_path="/memo.docx",
        identifier="body.p.1",
        new_text="Revenue grew 15% in 2024.",
    )
    runs = reopen(world).paragraphs[1].runs
    assert [(r.text, r.bold, r.italic) for r in runs] == [
        ("Revenue grew ", None, None),
        ("15%", True, None),
        (" in 2024.", None, True),
    ]


def test_edit_paragraph_keeps_inline_image(env):
    docs, world = env
    docs.ok("edit_content_text", file_path="/memo.docx", identifier="body.p.2", new_text="Figure: the end")
    paragraph = reopen(world).paragraphs[2]
    assert paragraph.text == "Figure: the end"
    assert len(paragraph._p.findall(f".//{qn('w:drawing')}")) == 1
    # The image still sits between the two pieces of text.
    kinds = ["img" if r._r.findall(f".//{qn('w:drawing')}") else r.text for r in paragraph.runs]
    assert kinds[0].startswith("Figure") and "img" in kinds and kinds[-1].endswith("end")


def test_edit_run_cell_and_header(env):
    docs, world = env
    docs.ok("edit_content_text", file_path="/memo.docx", identifier="body.p.1.r.1", new_text="20%")
    docs.ok("edit_content_text", file_path="/memo.docx", identifier="body.tbl.0.r.1.c.1", new_text="250")
    docs.ok("edit_content_text", file_path="/memo.docx", identifier="header.s.0.p.0", new_text="Internal")
    document = reopen(world)
    assert document.paragraphs[1].runs[1].text == "20%" and document.paragraphs[1].runs[1].bold
    assert document.tables[0].cell(1, 1).text == "250"
    assert document.sections[0].header.paragraphs[0].text == "Internal"


def test_edit_errors_are_clear(env):
    docs, _world = env
    error = docs.error("edit_content_text", file_path="/memo.docx", identifier="body.p.99", new_text="x")
    assert error["code"] == "not_found" and "body.p.99" in error["message"]
    error = docs.error("edit_content_text", file_path="/memo.docx", identifier="para 3", new_text="x")
    assert error["code"] == "invalid_argument"
    error = docs.error("edit_content_text", file_path="/missing.docx", identifier="body.p.0", new_text="x")
    assert error["code"] == "not_found" and "/missing.docx" in error["message"]


# --- inserting and deleting ------------------------------------------------------------


def test_add_text_inserts_paragraphs_and_extends(env):
    docs, world = env
    docs.ok(
        "add_content_text", file_path="/memo.docx", identifier="body.p.0", text="Intro line", position="after"
    )
    docs.ok(
        "add_content_text", file_path="/memo.docx", identifier="body.p.2", text=" Costs fell.", position="end"
    )
    docs.ok("add_content_text", file_path="/memo.docx", identifier="body", text="Closing", position="end")
    document = reopen(world)
    texts = [p.text for p in document.paragraphs]
    assert texts[1] == "Intro line" and document.paragraphs[1].style.name == "Normal"
    assert texts[2] == "Revenue grew 12% in 2023. Costs fell."
    assert document.paragraphs[2].runs[-1].italic  # took the formatting of the text before it
    assert texts[-1] == "Closing"


def test_insert_content_and_add_table_at_identifier(env):
    docs, world = env
    docs.ok(
        "insert_content",
        file_path="/memo.docx",
        identifier="body.p.1",
        position="after",
        content=[
            {"type": "heading", "text": "Details", "level": 2},
            {"type": "bullet_list", "items": ["a", "b"]},
        ],
    )
    docs.ok(
        "add_table",
        file_path="/memo.docx",
        identifier="body.p.0",
        position="after",
        rows=[["K", "V"], [1, 2]],
    )
    blocks = docs.ok("read_document_content", file_path="/memo.docx")["blocks"]
    assert [(b["id"], b["type"]) for b in blocks[:6]] == [
        ("body.p.0", "heading"),
        ("body.tbl.0", "table"),
        ("body.p.1", "paragraph"),
        ("body.p.2", "heading"),
        ("body.p.3", "list_item"),
        ("body.p.4", "list_item"),
    ]
    assert blocks[1]["rows"] == [["K", "V"], ["1", "2"]]


def test_delete_element_and_text(env):
    docs, world = env
    docs.ok("delete_content_text", file_path="/memo.docx", identifier="body.p.2")  # default scope: content
    paragraph = reopen(world).paragraphs[2]
    assert paragraph.text == "" and paragraph._p.findall(f".//{qn('w:drawing')}")
    docs.ok("delete_content_text", file_path="/memo.docx", identifier="body.p.1", scope="element")
    docs.ok("delete_content_text", file_path="/memo.docx", identifier="body.tbl.0.r.1", scope="element")
    document = reopen(world)
    assert "Revenue" not in [p.text for p in document.paragraphs][1]
    assert len(document.tables[0].rows) == 1
    assert docs.error("delete_content_text", file_path="/memo.docx", identifier="body", scope="element")[
        "code"
    ] == ("invalid_argument")


# --- formatting, images, layout ---------------------------------------------------------


def test_apply_formatting_to_paragraph_and_run(env):
    docs, world = env
    docs.ok(
        "apply_formatting",
        file_path="/memo.docx",
        identifier="body.p.1",
        font_color="#1F4E79",
        font_size=14,
        alignment="center",
    )
    docs.ok("apply_formatting", file_path="/memo.docx", identifier="body.p.1.r.0", underline=True)
    paragraph = reopen(world).paragraphs[1]
    assert paragraph.alignment == 1
    assert all(str(r.font.color.rgb) == "1F4E79" and r.font.size.pt == 14 for r in paragraph.runs)
    assert paragraph.runs[0].underline and not paragraph.runs[1].underline
    assert paragraph.runs[1].bold  # formatting it did not touch stays
    error = docs.error("apply_formatting", file_path="/memo.docx", identifier="body.p.1", font_color="bluish")
    assert error["code"] == "invalid_argument"
    assert (
        docs.error("apply_formatting", file_path="/memo.docx", identifier="body.p.1.r.0", style="Title")[
            "code"
        ]
        == "invalid_argument"
    )


def test_add_and_modify_image(env):
    docs, world = env
    added = docs.ok("add_image", file_path="/memo.docx", image_path="/img/blue.png", width=3)
    assert added["annotation"] == "image.1" and added["width_inches"] == 3.0
    overview = docs.ok("get_document_overview", file_path="/memo.docx")
    assert overview["images"] == 2
    changed = docs.ok("modify_image", file_path="/memo.docx", image_index=1, width=1.5, alt_text="blue")
    assert (changed["width_inches"], changed["height_inches"], changed["description"]) == (1.5, 0.38, "blue")
    replaced = docs.ok(
        "modify_image", file_path="/memo.docx", annotation="image.0", image_path="/img/blue.png"
    )
    assert replaced["width_inches"] == 2.0 and replaced["height_inches"] == 0.5
    result = docs.call("read_image", file_path="/memo.docx", annotation="image.0")
    image = next(block for block in result.content if getattr(block, "type", "") == "image")
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (80, 20)
    assert docs.error("add_image", file_path="/memo.docx", image_path="/memo.docx")["code"] == "unsupported"


def test_margins_orientation_header_footer(env):
    docs, world = env
    docs.ok("page_margins", file_path="/memo.docx", top=0.5, left=0.75)
    docs.ok("page_orientation", file_path="/memo.docx", orientation="landscape")
    docs.ok("header_footer", file_path="/memo.docx", action="set", area="footer", text="Page footer")
    section = reopen(world).sections[0]
    assert (section.top_margin.inches, section.left_margin.inches) == (0.5, 0.75)
    assert section.orientation == 1 and section.page_width > section.page_height
    assert section.footer.paragraphs[0].text == "Page footer"
    read = docs.ok("header_footer", file_path="/memo.docx")
    assert read["sections"][0]["text"] == "Confidential"
    margins = docs.ok("page_margins", file_path="/memo.docx")["sections"][0]["margins_inches"]
    assert margins["top"] == 0.5
    assert (
        docs.error("page_orientation", file_path="/memo.docx", orientation="sideways")["code"]
        == "invalid_argument"
    )


# --- creating and deleting files ---------------------------------------------------------


def test_create_document_with_every_block_type(env):
    docs, world = env
    result = docs.ok(
        "create_document",
        directory="/Outputs",
        file_name="report.docx",
        metadata={"title": "Report", "subject": "Q3"},
        content=[
            {"type": "heading", "text": "Report", "level": 0},
            {"type": "heading", "text": "Summary", "level": 1},
            {"type": "paragraph", "runs": [{"text": "Bold", "bold": True}, {"text": " plain"}]},
            {"type": "bullet_list", "items": ["x", {"text": "nested", "level": 1}]},
            {"type": "numbered_list", "items": ["first", "second"]},
            {"type": "table", "rows": [["h1", "h2"], ["a", "b"]], "header": True},
            {"type": "image", "path": "/img/red.png", "width_inches": 1},
            {"type": "page_break"},
            {"type": "numbered_list", "items": ["again one"]},
            {"type": "section_break", "orientation": "landscape"},
            {"type": "paragraph", "text": "Wide page"},
        ],
    )
    assert result["file_path"] == "/Outputs/report.docx"
    document = reopen(world, "/Outputs/report.docx")
    assert document.core_properties.title == "Report" and document.core_properties.author == "Dana Ruiz"
    styles = [p.style.name for p in document.paragraphs if p.text]
    assert styles[:6] == ["Title", "Heading 1", "Normal", "List Bullet", "List Bullet 2", "List Number"]
    assert document.tables[0].cell(0, 0).paragraphs[0].runs[0].bold
    assert len(document.sections) == 2 and document.sections[1].orientation == 1
    # The second numbered list restarts at 1: its paragraphs use their own numbering instance.
    num_ids = [
        p._p.pPr.numPr.numId.val
        for p in document.paragraphs
        if p.style.name == "List Number" and p._p.pPr is not None and p._p.pPr.numPr is not None
    ]
    assert len(set(num_ids)) == 1 and len(num_ids) == 1  # only "again one" carries an explicit restart
    assert docs.error("create_document", directory="/Outputs", file_name="report.docx", content=[])[
        "code"
    ] == ("already_exists")
    assert (
        docs.error("create_document", directory="/Outputs", file_name="r.txt", content=[])["code"]
        == "unsupported"
    )
    error = docs.error("create_document", directory="/", file_name="x.docx", content=[{"type": "table"}])
    assert error["code"] == "invalid_argument" and "content[0]" in error["message"]


def test_reference_solution_shapes(env):
    """The argument shapes the sample benchmark's reference solutions use."""
    docs, world = env
    docs.ok(
        "create_document",
        directory="/Outputs",
        file_name="memo.docx",
        content=[
            {"type": "heading", "text": "Key terms", "level": 1},
            {"type": "paragraph", "text": "Body"},
            {"type": "bullet_list", "items": ["a"]},
            {"type": "numbered_list", "items": ["b"]},
            {"type": "table", "rows": [["h1", "h2"], ["a", "b"]], "header": True},
            {"type": "page_break"},
        ],
    )
    docs.ok(
        "add_content_text",
        file_path="/Outputs/memo.docx",
        identifier="body.p.1",
        text="after",
        position="after",
    )
    docs.ok("edit_content_text", file_path="/Outputs/memo.docx", identifier="body.p.1", new_text="Body v2")
    assert [p.text for p in reopen(world, "/Outputs/memo.docx").paragraphs][:3] == [
        "Key terms",
        "Body v2",
        "after",
    ]


def test_delete_document(env):
    docs, world = env
    docs.ok("delete_document", file_path="/memo.docx")
    assert not (world.fs_root / "memo.docx").exists()
    world.file("/notes.txt", "keep")
    assert docs.error("delete_document", file_path="/notes.txt")["code"] == "unsupported"
    assert (world.fs_root / "notes.txt").exists()


# --- damaged and protected files ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "code", "words"),
    [
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "unsupported", "password-protected"),
        (b"this is not a zip", "bad_data", "not a valid .docx"),
        (b"PK\x03\x04 truncated", "bad_data", "not a valid .docx"),
    ],
)
def test_encrypted_and_corrupt_files_are_named(env, content, code, words):
    docs, world = env
    world.file("/Legal/broken.docx", content)
    for tool, extra in [
        ("read_document_content", {}),
        ("get_document_overview", {}),
        ("edit_content_text", {"identifier": "body.p.0", "new_text": "x"}),
    ]:
        error = docs.error(tool, file_path="/Legal/broken.docx", **extra)
        assert (
            error["code"] == code and "/Legal/broken.docx" in error["message"] and words in error["message"]
        )
    assert (world.fs_root / "Legal/broken.docx").read_bytes() == content


def test_zip_without_document_part_is_bad_data(env):
    docs, world = env
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        package.writestr("hello.txt", "hi")
    world.file("/empty.docx", buffer.getvalue())
    error = docs.error("read_document_content", file_path="/empty.docx")
    assert error["code"] == "bad_data" and "/empty.docx" in error["message"]


@pytest.mark.parametrize("hostile", ["../outside/pic.png", "/../outside/pic.png", "/link_out/pic.png"])
def test_image_paths_inside_content_blocks_stay_in_the_root(env, hostile):
    docs, world = env
    outside = world.base.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "pic.png").write_bytes(png_bytes())
    if not (world.fs_root / "link_out").exists():
        (world.fs_root / "link_out").symlink_to(outside)
    error = docs.error(
        "create_document", directory="/", file_name="x.docx", content=[{"type": "image", "path": hostile}]
    )
    assert error["code"] == "path_outside_root"
    error = docs.error(
        "insert_content",
        file_path="/memo.docx",
        identifier="body",
        content=[{"type": "image", "path": hostile}],
    )
    assert error["code"] == "path_outside_root"
    assert not (world.fs_root / "x.docx").exists()


def test_zip_bomb_is_refused_unopened(env, monkeypatch):
    docs, world = env
    import dataclasses

    from atoll.formats import bounds

    monkeypatch.setattr(bounds, "LIMITS", dataclasses.replace(bounds.LIMITS, max_unpacked_bytes=10_000))
    error = docs.error("read_document_content", file_path="/memo.docx")
    assert error["code"] == "too_large" and "/memo.docx" in error["message"] and "unpacks" in error["message"]


def test_tool_lists_in_both_modes(env):
    docs, _world = env
    names = docs.session.tool_names()
    if docs.mode == "individual":
        assert len(names) == 17 and {"read_document_content", "edit_content_text", "add_table"} <= set(names)
    else:
        assert names == ["docs", "docs_schema"]


def test_modify_image_pixel_operations(env):
    docs, world = env
    rotated = docs.ok("modify_image", file_path="/memo.docx", image_index=0, operation="rotate", rotation=90)
    assert (rotated["width_inches"], rotated["height_inches"]) == (2.0, 4.0)  # 40x20 turned to 20x40
    result = docs.call("read_image", file_path="/memo.docx", annotation="image.0")
    image = next(block for block in result.content if getattr(block, "type", "") == "image")
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (20, 40)
    docs.ok("modify_image", file_path="/memo.docx", image_index=0, operation="flip", flip="vertical")
    docs.ok("modify_image", file_path="/memo.docx", image_index=0, operation="brightness", brightness=0.5)
    cropped = docs.ok(
        "modify_image",
        file_path="/memo.docx",
        image_index=0,
        operation="crop",
        crop_left=0,
        crop_top=0,
        crop_right=20,
        crop_bottom=10,
    )
    assert cropped["height_inches"] == 1.0
    result = docs.call("read_image", file_path="/memo.docx", annotation="image.0")
    image = next(block for block in result.content if getattr(block, "type", "") == "image")
    pixel = Image.open(io.BytesIO(base64.b64decode(image.data))).convert("RGB").getpixel((5, 5))
    assert pixel[0] < 200 and pixel[1] == 0  # darkened red
    error = docs.error("modify_image", file_path="/memo.docx", image_index=0, operation="rotate")
    assert error["code"] == "invalid_argument" and "rotation" in error["message"]
    error = docs.error("modify_image", file_path="/memo.docx", image_index=0, operation="melt")
    assert error["code"] == "invalid_argument"


def test_header_footer_content_blocks_and_link(env):
    docs, world = env
    docs.ok(
        "create_document",
        directory="/",
        file_name="two.docx",
        content=[
            {"type": "paragraph", "text": "one"},
            {"type": "section_break"},
            {"type": "paragraph", "text": "two"},
        ],
    )
    docs.ok(
        "header_footer",
        file_path="/two.docx",
        action="set",
        area="header",
        section_index=0,
        text="First header",
    )
    docs.ok(
        "header_footer",
        file_path="/two.docx",
        action="set",
        area="header",
        section_index=1,
        content=[{"type": "paragraph", "text": "Own header"}, {"type": "table", "rows": [["a", "b"]]}],
    )
    read = docs.ok("header_footer", file_path="/two.docx")["sections"]
    assert [(s["text"], s["tables"]) for s in read] == [("First header", 0), ("Own header", 1)]
    docs.ok("header_footer", file_path="/two.docx", action="link", area="header", section_index=1)
    read = docs.ok("header_footer", file_path="/two.docx")["sections"]
    assert read[1]["linked_to_previous"] and read[1]["text"] == "First header"
    error = docs.error(
        "header_footer",
        file_path="/two.docx",
        action="set",
        content=[{"type": "image", "path": "/img/red.png"}],
    )
    assert error["code"] == "unsupported"


def test_sections_paging_and_explicit_actions(env):
    docs, world = env
    docs.ok(
        "create_document",
        directory="/",
        file_name="two.docx",
        content=[
            {"type": "paragraph", "text": "one"},
            {"type": "section_break"},
            {"type": "paragraph", "text": "two"},
        ],
    )
    second = docs.ok("read_document_content", file_path="/two.docx", section_index=1)
    assert [b["text"] for b in second["blocks"]] == ["two"] and second["sections"] == 2
    assert docs.error("read_document_content", file_path="/two.docx", section_index=2)["code"] == "not_found"
    read = docs.ok("page_margins", file_path="/two.docx", action="read", section_index=1)
    assert len(read["sections"]) == 1
    docs.ok("page_margins", file_path="/two.docx", action="set", section_index=1, right=2)
    assert reopen(world, "/two.docx").sections[1].right_margin.inches == 2
    assert docs.error("page_margins", file_path="/two.docx", action="set")["code"] == "invalid_argument"
    docs.ok("page_orientation", file_path="/two.docx", action="set", orientation="landscape", section_index=0)
    orientations = [
        s["orientation"]
        for s in docs.ok("page_orientation", file_path="/two.docx", action="read")["sections"]
    ]
    assert orientations == ["landscape", "portrait"]


def test_delete_run_collapses_whitespace(env):
    docs, world = env
    docs.ok(
        "edit_content_text",
        file_path="/memo.docx",
        identifier="body.p.1",
        new_text="Revenue grew 12% in 2023.",
    )
    docs.ok(
        "delete_content_text",
        file_path="/memo.docx",
        identifier="body.p.1.r.1",
        scope="element",
        collapse_whitespace=True,
    )
    assert reopen(world).paragraphs[1].text == "Revenue grew in 2023."


def test_content_blocks_accept_loose_shapes(env):
    docs, world = env
    docs.ok(
        "create_document",
        directory="/",
        file_name="loose.docx",
        content=[
            {"type": "paragraph", "content": "from content"},
            {"type": "table", "headers": ["H1", "H2"], "rows": [["a", "b"]]},
            {"type": "image", "path": "/img/red.png", "width": 1},
        ],
    )
    document = reopen(world, "/loose.docx")
    assert document.paragraphs[0].text == "from content"
    assert document.tables[0].cell(0, 0).text == "H1" and document.tables[0].cell(1, 1).text == "b"
    assert docs.ok("get_document_overview", file_path="/loose.docx")["images"] == 1
    error = docs.error(
        "create_document", directory="/", file_name="bad.docx", content=[{"type": "paragraph", "txt": "x"}]
    )
    assert error["code"] == "invalid_argument" and "txt" in error["message"]


def test_headers_take_text_and_tables_but_not_pictures(env):
    docs, world = env
    docs.ok(
        "add_content_text",
        file_path="/memo.docx",
        identifier="header.s.0",
        text="Second line",
        position="end",
    )
    docs.ok(
        "insert_content",
        file_path="/memo.docx",
        identifier="header.s.0",
        content=[{"type": "table", "rows": [["x"]]}],
    )
    header = reopen(world).sections[0].header
    assert [p.text for p in header.paragraphs] == ["Confidential", "Second line"] and len(header.tables) == 1
    error = docs.error(
        "add_image", file_path="/memo.docx", image_path="/img/red.png", identifier="header.s.0.p.0"
    )
    assert error["code"] == "unsupported"
    error = docs.error(
        "insert_content",
        file_path="/memo.docx",
        identifier="footer.s.0",
        content=[{"type": "image", "path": "/img/red.png"}],
    )
    assert error["code"] == "unsupported"
