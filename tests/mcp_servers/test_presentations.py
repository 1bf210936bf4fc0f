"""Presentations server (.pptx): every tool in both modes, on real decks written by python-pptx."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from PIL import Image
from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.dml.color import RGBColor
from pptx.enum.chart import XL_CHART_TYPE
from pptx.util import Inches, Pt

from mcp_servers.presentations.server import SERVER
from tests.mcp_servers.helpers import make_world, open_session, text_of

MODES = ("individual", "consolidated")


class Slides:
    """Calls a presentations tool by its individual name in either mode."""

    def __init__(self, session: Any, mode: str) -> None:
        self.session, self.mode = session, mode

    def _args(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.mode == "individual":
            return tool, arguments
        return "slides", {"action": SERVER.find(tool).action, **arguments}

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.ok(*self._args(tool, arguments))

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.session.error(*self._args(tool, arguments))

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.session.call(*self._args(tool, arguments))

    def text(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        assert not result.is_error, text_of(result)
        return text_of(result)


def png_bytes(width: int = 40, height: int = 20, color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def write_deck(path: Path, image: Path) -> None:
    """Title slide; bullets with a bold, coloured run and notes; a picture and a chart; a table."""
    deck = Presentation()
    title = deck.slides.add_slide(deck.slide_layouts[0])
    title.shapes.title.text = "Board update"
    title.placeholders[1].text = "March 2024"
    bullets = deck.slides.add_slide(deck.slide_layouts[1])
    bullets.shapes.title.text = "Transaction overview"
    frame = bullets.placeholders[1].text_frame
    paragraph = frame.paragraphs[0]
    label = paragraph.add_run()
    label.text = "Offer: "
    value = paragraph.add_run()
    value.text = "$420M at 9.1x EBITDA"
    value.font.bold = True
    value.font.size = Pt(28)
    value.font.color.rgb = RGBColor(0xC0, 0x00, 0x00)
    second = frame.add_paragraph()
    second.text = "Closing expected Q3"
    second.level = 1
    bullets.notes_slide.notes_text_frame.text = "Mention the $420M offer"
    media = deck.slides.add_slide(deck.slide_layouts[5])
    media.shapes.title.text = "Charts"
    media.shapes.add_picture(str(image), Inches(0.5), Inches(1.5), Inches(2))
    data = CategoryChartData()
    data.categories = ["2022", "2023"]
    data.add_series("Revenue", (10.0, 12.5))
    media.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(4), Inches(1.5), Inches(5), Inches(4), data)
    table_slide = deck.slides.add_slide(deck.slide_layouts[5])
    table_slide._element.set("show", "0")
    table_slide.shapes.title.text = "Numbers"
    table = table_slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    for r, row in enumerate([["Metric", "Value"], ["EBITDA", "$46M"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    deck.save(str(path))


def write_workbook(path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Data"
    for row in [["Year", "Revenue", "EBITDA"], [2022, 380, 40], [2023, 420, 46], [2024, 455, 51]]:
        sheet.append(row)
    sheet["E1"] = "text"
    sheet["E2"] = "not a number"
    workbook.save(str(path))


@pytest.fixture(params=MODES)
def env(request, tmp_path):
    world = make_world(tmp_path)
    image = world.file("/img/red.png", png_bytes())
    world.file("/img/blue.png", png_bytes(80, 20, "blue"))
    (world.fs_root / "Board").mkdir()
    write_deck(world.fs_root / "Board" / "deck.pptx", image)
    write_workbook(world.fs_root / "data.xlsx")
    with open_session(
        "presentations", world, mode=request.param, options={"user_name": "Dana Ruiz"}
    ) as session:
        yield Slides(session, request.param), world


DECK = "/Board/deck.pptx"


def reopen(world, virtual: str = DECK) -> Any:
    return Presentation(str(world.fs_root / virtual.lstrip("/")))


def all_text(deck: Any) -> str:
    parts = []
    for slide in deck.slides:
        for shape in slide.shapes:
            if shape.has_text_frame:
                parts.append(shape.text_frame.text)
            if shape.has_table:
                parts.extend(cell.text for row in shape.table.rows for cell in row.cells)
    return "\n".join(parts)


# --- reading ------------------------------------------------------------------------------


def test_read_completedeck_shows_text_tables_charts_images_notes(env):
    slides, _world = env
    data = slides.ok("read_completedeck", file_path=DECK)
    assert data["slide_count"] == 4
    assert [s["title"] for s in data["slides"]] == [
        "Board update",
        "Transaction overview",
        "Charts",
        "Numbers",
    ]
    text = slides.text("read_completedeck", file_path=DECK)
    assert "# Board update" in text and "March 2024" in text
    assert "- Offer: $420M at 9.1x EBITDA" in text and "  - Closing expected Q3" in text
    assert "Notes: Mention the $420M offer" in text
    assert "[image slide.2.image.0" in text
    assert "categories: 2022, 2023; Revenue: 10, 12.5" in text
    assert "| EBITDA | $46M |" in text
    assert "## Slide 3 (layout: Title Only, hidden)" in text and data["slides"][3]["hidden"]


def test_read_slides_by_character_range(env):
    slides, _world = env
    whole = slides.ok("read_slides", file_path=DECK)
    assert not whole["has_more"] and whole["end"] == whole["total_chars"]
    first = slides.ok("read_slides", file_path=DECK, start=0, end=50)
    rest = slides.ok("read_slides", file_path=DECK, start=first["end"])
    assert first["has_more"] and first["text"] + rest["text"] == whole["text"]


def test_read_individualslide_lists_shapes(env):
    slides, _world = env
    data = slides.ok("read_individualslide", file_path=DECK, slide_index=2)
    kinds = [s["kind"] for s in data["shapes"]]
    assert kinds == ["title", "image", "chart"]
    assert data["shapes"][2]["chart"]["series"] == [{"name": "Revenue", "values": [10.0, 12.5]}]
    assert slides.error("read_individualslide", file_path=DECK, slide_index=9)["code"] == "not_found"


def test_read_image_returns_the_picture(env):
    slides, _world = env
    result = slides.call("read_image", file_path=DECK, annotation="slide.2.image.0")
    assert not result.is_error
    image = next(block for block in result.content if getattr(block, "type", "") == "image")
    assert image.mimeType == "image/png"
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (40, 20)
    assert slides.error("read_image", file_path=DECK, annotation="slide.1.image.0")["code"] == "not_found"
    assert slides.error("read_image", file_path=DECK, annotation="picture 1")["code"] == "invalid_argument"


# --- replace_text keeps formatting ------------------------------------------------------------


def test_replace_text_changes_only_matching_runs(env):
    slides, world = env
    result = slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[{"type": "replace_text", "slide_index": None, "search": "$420M", "replace": "$435M"}],
    )
    assert result["applied"][0]["replacements"] == 1  # notes are not slide text
    run = reopen(world).slides[1].placeholders[1].text_frame.paragraphs[0].runs[1]
    assert run.text == "$435M at 9.1x EBITDA"
    assert run.font.bold and run.font.size == Pt(28) and run.font.color.rgb == RGBColor(0xC0, 0, 0)
    label = reopen(world).slides[1].placeholders[1].text_frame.paragraphs[0].runs[0]
    assert label.text == "Offer: " and label.font.bold is None
    assert reopen(world).slides[1].notes_slide.notes_text_frame.text == "Mention the $420M offer"
    result = slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[{"type": "replace_text", "search": "$420M", "replace": "$435M", "include_notes": True}],
    )
    assert result["applied"][0]["replacements"] == 1
    assert reopen(world).slides[1].notes_slide.notes_text_frame.text == "Mention the $435M offer"


def test_replace_text_across_runs_and_in_tables(env):
    slides, world = env
    slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[
            {"type": "replace_text", "search": "Offer: $420M", "replace": "Bid: $430M"},
            {"type": "replace_text", "slide_index": 3, "search": "$46M", "replace": "$47M"},
            {
                "type": "replace_text",
                "search": "board UPDATE",
                "replace": "Board review",
                "match_case": False,
            },
        ],
    )
    deck = reopen(world)
    runs = deck.slides[1].placeholders[1].text_frame.paragraphs[0].runs
    assert "".join(r.text for r in runs) == "Bid: $430M at 9.1x EBITDA"
    assert runs[1].font.bold  # the untouched rest of the bold run stays bold
    assert deck.slides[3].shapes[1].table.cell(1, 1).text == "$47M"
    assert deck.slides[0].shapes.title.text_frame.text == "Board review"


def test_reference_solution_replace_shape(env):
    slides, world = env
    replacements = {"9.1x": "9.5x", "March 2024": "April 2024"}
    slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[
            {"type": "replace_text", "slide_index": None, "search": old, "replace": new}
            for old, new in replacements.items()
        ],
    )
    text = all_text(reopen(world))
    assert "9.5x" in text and "April 2024" in text and "9.1x" not in text


# --- other edit operations ------------------------------------------------------------------


def test_title_subtitle_bullets_notes(env):
    slides, world = env
    slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[
            {"type": "update_title", "slide_index": 1, "title": "Deal overview"},
            {"type": "update_subtitle", "slide_index": 0, "subtitle": "April 2024"},
            {
                "type": "add_bullets",
                "slide_index": 1,
                "bullets": ["New point", {"text": "detail", "level": 1}],
            },
            {"type": "set_notes", "slide_index": 1, "notes": "Updated notes"},
            {"type": "add_bullets", "slide_index": 3, "bullets": ["Box bullet"]},
        ],
    )
    deck = reopen(world)
    assert deck.slides[1].shapes.title.text_frame.text == "Deal overview"
    assert deck.slides[0].placeholders[1].text_frame.text == "April 2024"
    paragraphs = deck.slides[1].placeholders[1].text_frame.paragraphs
    assert [(p.text, p.level) for p in paragraphs] == [
        ("Offer: $420M at 9.1x EBITDA", 0),
        ("Closing expected Q3", 1),
        ("New point", 0),
        ("detail", 1),
    ]
    assert deck.slides[1].notes_slide.notes_text_frame.text == "Updated notes"
    assert "Box bullet" in all_text(deck)
    slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[{"type": "replace_bullets", "slide_index": 1, "bullets": ["Only"]}],
    )
    assert [p.text for p in reopen(world).slides[1].placeholders[1].text_frame.paragraphs] == ["Only"]


def test_duplicate_keeps_images_and_charts(env):
    slides, world = env
    result = slides.ok(
        "edit_slides", file_path=DECK, operations=[{"type": "duplicate_slide", "slide_index": 2}]
    )
    assert result["applied"][0]["new_slide_index"] == 3 and result["slide_count"] == 5
    deck = reopen(world)
    copy = deck.slides[3]
    assert copy.shapes.title.text_frame.text == "Charts"
    picture = next(s for s in copy.shapes if s.shape_type == 13)
    assert picture.image.size == (40, 20)
    chart_frames = [s for s in copy.shapes if s.has_chart]
    assert len(chart_frames) == 1 and list(chart_frames[0].chart.plots[0].series[0].values) == [10.0, 12.5]
    original_chart = next(s for s in deck.slides[2].shapes if s.has_chart)
    assert chart_frames[0].chart.part is not original_chart.chart.part  # its own chart part
    result = slides.call("read_image", file_path=DECK, annotation="slide.3.image.0")
    assert not result.is_error
    # The copied chart's data is independent: replacing it in the copy leaves the original.
    chart_frames[0].chart.replace_data(_data(99.0))
    deck.save(str(world.fs_root / "Board" / "deck.pptx"))
    deck = reopen(world)
    assert list(next(s for s in deck.slides[2].shapes if s.has_chart).chart.plots[0].series[0].values) == [
        10.0,
        12.5,
    ]


def _data(value: float) -> CategoryChartData:
    data = CategoryChartData()
    data.categories = ["2022", "2023"]
    data.add_series("Revenue", (value, value))
    return data


def test_move_and_delete_slides(env):
    slides, world = env
    slides.ok(
        "edit_slides",
        file_path=DECK,
        operations=[
            {"type": "move_slide", "slide_index": 3, "to_index": 0},
            {"type": "delete_slide", "slide_index": 2},
        ],
    )
    titles = [s.shapes.title.text_frame.text for s in reopen(world).slides]
    assert titles == ["Numbers", "Board update", "Charts"]


def test_edit_slides_is_all_or_nothing(env):
    slides, world = env
    before = (world.fs_root / "Board" / "deck.pptx").read_bytes()
    error = slides.error(
        "edit_slides",
        file_path=DECK,
        operations=[
            {"type": "update_title", "slide_index": 0, "title": "Changed"},
            {"type": "update_title", "slide_index": 42, "title": "Nope"},
        ],
    )
    assert error["code"] == "not_found" and "42" in error["message"]
    assert (world.fs_root / "Board" / "deck.pptx").read_bytes() == before
    error = slides.error(
        "edit_slides", file_path=DECK, operations=[{"type": "update_title", "slide_index": 0}]
    )
    assert error["code"] == "invalid_argument" and "title" in error["message"]
    assert (
        slides.error("edit_slides", file_path=DECK, operations=[{"type": "explode"}])["code"]
        == "invalid_argument"
    )


# --- creating, adding ------------------------------------------------------------------------


def test_create_deck_with_every_layout(env):
    slides, world = env
    result = slides.ok(
        "create_deck",
        directory="/Outputs",
        file_name="new.pptx",
        metadata={"title": "Preread"},
        slides=[
            {"layout": "title", "title": "Preread", "subtitle": "SteerCo"},
            {
                "layout": "title_and_content",
                "title": "Agenda",
                "bullets": ["One", {"text": "sub", "level": 1}],
                "notes": "n",
            },
            {"layout": "section_header", "title": "Part 2", "subtitle": "Details"},
            {"layout": "two_content", "title": "Compare", "columns": [["left a", "left b"], ["right"]]},
            {"layout": "title_only", "title": "Table", "table": {"rows": [["h1", "h2"], ["a", "b"]]}},
            {"layout": "blank"},
        ],
    )
    assert result == {
        "file_path": "/Outputs/new.pptx",
        "slide_count": 6,
        "bytes": result["bytes"],
        "created": True,
    }
    deck = reopen(world, "/Outputs/new.pptx")
    assert [s.slide_layout.name for s in deck.slides] == [
        "Title Slide",
        "Title and Content",
        "Section Header",
        "Two Content",
        "Title Only",
        "Blank",
    ]
    assert deck.core_properties.title == "Preread" and deck.core_properties.author == "Dana Ruiz"
    assert [p.level for p in deck.slides[1].placeholders[1].text_frame.paragraphs] == [0, 1]
    assert deck.slides[1].notes_slide.notes_text_frame.text == "n"
    assert deck.slides[2].placeholders[1].text_frame.text == "Details"
    assert [
        ph.text_frame.text for ph in deck.slides[3].placeholders if ph.placeholder_format.idx in (1, 2)
    ] == [
        "left a\nleft b",
        "right",
    ]
    table = next(s for s in deck.slides[4].shapes if s.has_table).table
    assert table.cell(1, 1).text == "b" and table.cell(0, 0).text_frame.paragraphs[0].runs[0].font.bold
    assert (
        slides.error("create_deck", directory="/Outputs", file_name="new.pptx", slides=[])["code"]
        == "already_exists"
    )
    error = slides.error("create_deck", directory="/", file_name="x.pptx", slides=[{"layout": "diagonal"}])
    assert error["code"] == "invalid_argument" and "diagonal" in error["message"]


def test_add_slide_at_index(env):
    slides, world = env
    result = slides.ok(
        "add_slide",
        file_path=DECK,
        index=1,
        layout="title_and_content",
        title="Inserted",
        bullets=["x"],
        notes="hi",
    )
    assert result["slide_index"] == 1 and result["slide_count"] == 5
    deck = reopen(world)
    assert [s.shapes.title.text_frame.text for s in deck.slides][:3] == [
        "Board update",
        "Inserted",
        "Transaction overview",
    ]
    assert slides.error("add_slide", file_path=DECK, index=10)["code"] == "not_found"


def test_insert_table_and_shape(env):
    slides, world = env
    slides.ok("insert_table", file_path=DECK, slide_index=0, rows=[["A", "B"], [1, 2.5]], y=5, height=1)
    slides.ok(
        "add_shape",
        file_path=DECK,
        slide_index=0,
        shape_type="rounded_rectangle",
        text="Note",
        fill_color="#FFEEAA",
        font_size=18,
        bold=True,
    )
    deck = reopen(world)
    table = next(s for s in deck.slides[0].shapes if s.has_table).table
    assert table.cell(1, 1).text == "2.5"
    shape = next(s for s in deck.slides[0].shapes if s.has_text_frame and s.text_frame.text == "Note")
    assert str(shape.fill.fore_color.rgb) == "FFEEAA" and shape.text_frame.paragraphs[0].runs[0].font.bold
    assert (
        slides.error("add_shape", file_path=DECK, slide_index=0, shape_type="blob")["code"]
        == "invalid_argument"
    )


def test_add_and_modify_image(env):
    slides, world = env
    added = slides.ok("add_image", file_path=DECK, slide_index=0, image_path="/img/blue.png", width=2)
    assert added["annotation"] == "slide.0.image.0"
    changed = slides.ok("modify_image", file_path=DECK, annotation="slide.0.image.0", width=4, x=1)
    assert (changed["width"], changed["height"], changed["x"]) == (4.0, 1.0, 1.0)
    slides.ok("modify_image", file_path=DECK, annotation="slide.2.image.0", image_path="/img/blue.png")
    picture = next(s for s in reopen(world).slides[2].shapes if s.shape_type == 13)
    assert picture.image.size == (80, 20)
    slides.ok("modify_image", file_path=DECK, annotation="slide.0.image.0", delete=True)
    assert not [s for s in reopen(world).slides[0].shapes if s.shape_type == 13]
    assert (
        slides.error("add_image", file_path=DECK, slide_index=0, image_path="/data.xlsx")["code"]
        == "unsupported"
    )


def test_insert_chart_from_workbook(env):
    slides, world = env
    result = slides.ok(
        "insert_chart",
        presentation_path=DECK,
        slide_index=3,
        spreadsheet_path="/data.xlsx",
        sheet_name="Data",
        data_range="A1:C4",
        chart_type="line",
        title="Growth",
    )
    assert (result["categories"], result["series"]) == (3, 2)
    chart = next(s for s in reopen(world).slides[3].shapes if s.has_chart).chart
    assert [s.name for s in chart.plots[0].series] == ["Revenue", "EBITDA"]
    assert list(chart.plots[0].series[0].values) == [380.0, 420.0, 455.0]
    assert list(chart.plots[0].categories) == ["2022", "2023", "2024"]
    assert chart.chart_title.text_frame.text == "Growth"
    error = slides.error(
        "insert_chart",
        presentation_path=DECK,
        slide_index=3,
        spreadsheet_path="/data.xlsx",
        sheet_name="Nope",
        data_range="A1:C4",
    )
    assert error["code"] == "not_found" and "Data" in error["message"]
    error = slides.error(
        "insert_chart",
        presentation_path=DECK,
        slide_index=3,
        spreadsheet_path="/data.xlsx",
        sheet_name="Data",
        data_range="D1:E2",
    )
    assert error["code"] == "invalid_argument" and "E2" in error["message"]
    error = slides.error(
        "insert_chart",
        presentation_path=DECK,
        slide_index=3,
        spreadsheet_path="/data.xlsx",
        sheet_name="Data",
        data_range="A1:C4",
        chart_type="radar3d",
    )
    assert error["code"] == "invalid_argument"


def test_delete_deck(env):
    slides, world = env
    slides.ok("delete_deck", file_path=DECK)
    assert not (world.fs_root / "Board" / "deck.pptx").exists()
    assert slides.error("delete_deck", file_path="/data.xlsx")["code"] == "unsupported"


# --- damaged and protected files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "code", "words"),
    [
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "unsupported", "password-protected"),
        (b"not a zip at all", "bad_data", "not a valid .pptx"),
        (b"PK\x03\x04 truncated", "bad_data", "not a valid .pptx"),
    ],
)
def test_encrypted_and_corrupt_files_are_named(env, content, code, words):
    slides, world = env
    world.file("/Decks/broken.pptx", content)
    for tool, extra in [
        ("read_completedeck", {}),
        ("read_slides", {}),
        ("edit_slides", {"operations": [{"type": "replace_text", "search": "a", "replace": "b"}]}),
    ]:
        error = slides.error(tool, file_path="/Decks/broken.pptx", **extra)
        assert (
            error["code"] == code and "/Decks/broken.pptx" in error["message"] and words in error["message"]
        )
    world.file("/locked.xlsx", content)
    error = slides.error(
        "insert_chart",
        presentation_path=DECK,
        slide_index=0,
        spreadsheet_path="/locked.xlsx",
        sheet_name="Data",
        data_range="A1:B2",
    )
    assert error["code"] == code and "/locked.xlsx" in error["message"]


def test_tool_lists_in_both_modes(env):
    slides, _world = env
    names = slides.session.tool_names()
    if slides.mode == "individual":
        assert len(names) == 13 and {
            "create_deck",
            "edit_slides",
            "insert_chart",
            "read_completedeck",
        } <= set(names)
    else:
        assert names == ["slides", "slides_schema"]


# --- the reference's argument shapes -------------------------------------------------------------


def test_reference_operation_names_and_fields(env):
    slides, world = env
    slides.ok(
        "edit_slides",
        file_path=DECK,
        metadata={"subject": "Board"},
        operations=[
            {"type": "update_slide_title", "index": 1, "title": "Overview"},
            {"type": "update_slide_subtitle", "index": 0, "subtitle": "Q2"},
            {"type": "set_bullets", "index": 1, "placeholder": "body", "items": ["One", "Two"]},
            {"type": "append_bullets", "index": 1, "items": ["Three"]},
            {"type": "update_table_cell", "index": 3, "table_idx": 0, "row": 1, "column": 1, "text": "$48M"},
            {
                "type": "format_table_cell",
                "index": 3,
                "table_idx": 0,
                "row": 0,
                "column": 0,
                "bold": True,
                "bg_color": "FFFF00",
            },
            {
                "type": "apply_text_formatting",
                "index": 1,
                "placeholder": "title",
                "italic": True,
                "font_size": 30,
            },
            {
                "type": "add_hyperlink",
                "index": 1,
                "url": "https://example.com",
                "paragraph_index": 0,
                "run_index": 0,
            },
            {"type": "append_table", "index": 2, "rows": [["k", "v"], ["a", "1"]]},
            {"type": "duplicate_slide", "index": 0, "position": 4},
            {"type": "clear_placeholder", "index": 4, "placeholder": "subtitle"},
        ],
    )
    deck = reopen(world)
    assert deck.core_properties.subject == "Board"
    assert deck.slides[1].shapes.title.text_frame.text == "Overview"
    assert deck.slides[0].placeholders[1].text_frame.text == "Q2"
    assert [p.text for p in deck.slides[1].placeholders[1].text_frame.paragraphs] == ["One", "Two", "Three"]
    table = next(s for s in deck.slides[3].shapes if s.has_table).table
    assert table.cell(1, 1).text == "$48M" and table.cell(0, 0).text_frame.paragraphs[0].runs[0].font.bold
    title_run = deck.slides[1].shapes.title.text_frame.paragraphs[0].runs[0]
    assert title_run.font.italic and title_run.font.size == Pt(30)
    assert (
        deck.slides[1].placeholders[1].text_frame.paragraphs[0].runs[0].hyperlink.address
        == "https://example.com"
    )
    assert len([s for s in deck.slides[2].shapes if s.has_table]) == 1
    assert len(deck.slides) == 5 and deck.slides[4].shapes.title.text_frame.text == "Board update"
    assert deck.slides[4].placeholders[1].text_frame.text == ""
    error = slides.error(
        "edit_slides",
        file_path=DECK,
        operations=[{"type": "update_table_cell", "index": 3, "row": 5, "column": 0, "text": "x"}],
    )
    assert error["code"] == "not_found" and "2x2" in error["message"]


def test_reference_add_slide_and_media_arguments(env):
    slides, world = env
    result = slides.ok(
        "add_slide",
        file_path=DECK,
        slide_index=2,
        layout="title_and_content",
        content={"title": "From content", "bullets": ["b1"], "notes": "n"},
    )
    assert result["slide_index"] == 2
    deck = reopen(world)
    assert deck.slides[2].shapes.title.text_frame.text == "From content"
    assert slides.error("add_slide", file_path=DECK, content={"colour": "red"})["code"] == "invalid_argument"
    rotated = slides.ok(
        "modify_image", file_path=DECK, slide_index=3, image_index=0, operation="rotate", rotation=90
    )
    assert (rotated["width"], rotated["height"]) == (2.0, 4.0)
    result = slides.call("read_image", file_path=DECK, annotation="slide.3.image.0")
    image = next(block for block in result.content if getattr(block, "type", "") == "image")
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (20, 40)
    slides.ok(
        "modify_image", file_path=DECK, slide_index=3, image_index=0, operation="contrast", contrast=1.5
    )
    chart = slides.ok(
        "insert_chart",
        presentation_path=DECK,
        slide_index=4,
        spreadsheet_path="/data.xlsx",
        sheet_name="Data",
        data_range="A2:B4",
        include_header=False,
        position="right",
        chart_type="pie",
    )
    assert (chart["categories"], chart["series"]) == (3, 1)
    deck = reopen(world)
    shape = next(s for s in deck.slides[4].shapes if s.has_chart)
    assert shape.left > deck.slide_width // 2 and list(shape.chart.plots[0].series[0].values) == [
        380.0,
        420.0,
        455.0,
    ]
    shape_result = slides.ok(
        "add_shape",
        file_path=DECK,
        slide_index=0,
        shape_type="star",
        x=2,
        y=2,
        text="Hi",
        text_color="FF0000",
        line_width=2,
    )
    star = next(s for s in reopen(world).slides[0].shapes if s.shape_id == shape_result["shape_id"])
    assert star.left == 2 * 914400 and star.width == 2 * 914400
    assert str(star.text_frame.paragraphs[0].runs[0].font.color.rgb) == "FF0000"


def test_slide_specs_accept_loose_shapes(env):
    slides, world = env
    slides.ok(
        "create_deck",
        directory="/",
        file_name="loose.pptx",
        slides=[
            {
                "layout": "title_and_content",
                "title": "A",
                "bullets": {"items": ["x", "y"]},
                "speaker_notes": "n",
            },
            {"layout": "title_only", "title": "B", "table": [["h"], ["v"]]},
            {"layout": "two_content", "title": "C", "columns": [{"bullets": ["l"]}, {"items": ["r"]}]},
        ],
    )
    deck = reopen(world, "/loose.pptx")
    assert [p.text for p in deck.slides[0].placeholders[1].text_frame.paragraphs] == ["x", "y"]
    assert deck.slides[0].notes_slide.notes_text_frame.text == "n"
    assert next(s for s in deck.slides[1].shapes if s.has_table).table.cell(1, 0).text == "v"
    assert "r" in all_text(deck)


def test_placeholder_and_relationship_constants_match_python_pptx() -> None:
    # The server spells these out so that building it does not import python-pptx.
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.opc.constants import RELATIONSHIP_TYPE

    from atoll.formats import pptx as reading
    from mcp_servers.presentations import cloning, slides

    assert reading.TITLE_TYPES == (
        PP_PLACEHOLDER.TITLE,
        PP_PLACEHOLDER.CENTER_TITLE,
        PP_PLACEHOLDER.VERTICAL_TITLE,
    )
    assert slides.BODY_TYPES == (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY)
    assert reading.CHROME_TYPES == (PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.SLIDE_NUMBER)
    assert {RELATIONSHIP_TYPE.SLIDE_LAYOUT, RELATIONSHIP_TYPE.NOTES_SLIDE} == cloning._SKIP
