"""PDFs server: every tool in both modes, engine fallback, OCR of a scanned page, caps,
Unicode creation round trip, corrupt and password-protected files."""

from __future__ import annotations

import base64
import io
import traceback

import pymupdf
import pytest
from PIL import Image

from tests.mcp_servers.helpers import make_world, text_of
from tests.mcp_servers.test_spreadsheets_support import mode_session

MODES = ["individual", "consolidated"]


@pytest.fixture
def world(tmp_path):
    return make_world(tmp_path)


def _text_pdf(path, pages: list[str]) -> None:
    document = pymupdf.open()
    for text in pages:
        page = document.new_page()
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 770), text, fontsize=11)
    document.save(path)


def _scanned_pdf(path) -> None:
    """Page 1: an image of text only (no text layer); page 2: text with a strike-out mark."""
    source = pymupdf.open()
    page = source.new_page(width=420, height=200)
    page.insert_text((30, 80), "Invoice total: 4,250 EUR", fontsize=20)
    page.insert_text((30, 130), "Paid on 2024-03-01", fontsize=20)
    pixmap = page.get_pixmap(dpi=200)
    document = pymupdf.open()
    scanned = document.new_page(width=420, height=200)
    scanned.insert_image(scanned.rect, pixmap=pixmap)
    second = document.new_page()
    second.insert_text((72, 100), "Second page: the total was revised; old figure 3,900", fontsize=12)
    second.add_strikeout_annot(second.search_for("old figure 3,900")[0])
    document.save(path)


@pytest.mark.parametrize("mode", MODES)
def test_read_pages_selection_and_output_cap(world, mode):
    _text_pdf(world.fs_root / "report.pdf", [f"Page {i} " + "lorem ipsum " * 200 for i in range(1, 7)])
    with mode_session("pdfs", world, mode) as mcp:
        some = mcp.ok("read_pdf_pages", {"file_path": "/report.pdf", "pages": "2-3"})
        assert [p["page"] for p in some["pages"]] == [2, 3] and some["pages"][0]["engine"] == "pymupdf"
        assert some["pages"][0]["text"].startswith("Page 2")
        assert [
            p["page"]
            for p in mcp.ok("read_pdf_pages", {"file_path": "/report.pdf", "pages": [5, 1]})["pages"]
        ] == [5, 1]
        capped = mcp.ok("read_pdf_pages", {"file_path": "/report.pdf", "max_chars": 5000})
        assert [p["page"] for p in capped["pages"]] == [1, 2] and capped["truncated"]
        assert capped["continuation"] == "call again with pages='3-6'"
        rest = mcp.ok("read_pdf_pages", {"file_path": "/report.pdf", "pages": "3-6", "max_chars": 5000})
        assert rest["pages"][0]["page"] == 3
        error = mcp.error("read_pdf_pages", {"file_path": "/report.pdf", "pages": "7"})
        assert error["code"] == "invalid_argument" and "6 pages" in error["message"]


@pytest.mark.parametrize("mode", MODES)
def test_scanned_page_is_read_with_ocr_and_struck_text_reported(world, mode):
    _scanned_pdf(world.fs_root / "scan.pdf")
    with mode_session("pdfs", world, mode) as mcp:
        result = mcp.call("read_pdf_pages", {"file_path": "/scan.pdf"})
        data = result.structured_content
        first, second = data["pages"]
        assert first["engine"] == "ocr" and "Invoice total: 4,250 EUR" in first["text"]
        assert first["images"][0]["annotation"] == "page1_image1"
        assert second["engine"] == "pymupdf" and second["strikethrough"] == ["old figure 3,900"]
        assert "[struck through: old figure 3,900]" in text_of(result)
        found = mcp.ok("search_pdf", {"file_path": "/scan.pdf", "query": "TOTAL"})
        assert [(r["page"], r["line"], r["engine"]) for r in found["results"]] == [
            (1, 1, "ocr"),
            (2, 1, "pymupdf"),
        ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first_engine_text", ["", " \n", "\ufffd" * 12 + " ab"])
def test_text_layer_falls_back_to_pypdf(world, mode, first_engine_text, monkeypatch):
    from atoll.formats import pdf as extract

    _text_pdf(world.fs_root / "t.pdf", ["Fallback engine text"])
    # PyMuPDF finds nothing, or only glyphs it cannot map to Unicode.
    monkeypatch.setattr(pymupdf.Page, "get_text", lambda self, *a, **k: first_engine_text)
    with mode_session("pdfs", world, mode) as mcp:
        page = mcp.ok("read_pdf_pages", {"file_path": "/t.pdf"})["pages"][0]
    assert page["engine"] == "pypdf" and "Fallback engine text" in page["text"]
    assert extract.normalise("\ufb01nd \ufe8d") == "find \u0627"


@pytest.mark.parametrize("mode", MODES)
def test_search_locations_case_and_whole_word(world, mode):
    _text_pdf(world.fs_root / "s.pdf", ["Alpha beta\nGamma total\nsubtotal Total", "nothing\nTotal again"])
    with mode_session("pdfs", world, mode) as mcp:
        every = mcp.ok("search_pdf", {"file_path": "/s.pdf", "query": "total"})
        assert [(r["page"], r["line"], r["column"]) for r in every["results"]] == [
            (1, 2, 7),
            (1, 3, 4),
            (1, 3, 10),
            (2, 2, 1),
        ]
        words = mcp.ok(
            "search_pdf",
            {"file_path": "/s.pdf", "query": "total", "whole_word": True, "case_sensitive": True},
        )
        assert [(r["page"], r["line"]) for r in words["results"]] == [(1, 2)]
        capped = mcp.ok(
            "search_pdf", {"file_path": "/s.pdf", "query": "total", "max_results": 2, "context_chars": 5}
        )
        assert capped["total_matches"] == 4 and len(capped["results"]) == 2 and capped["truncated"]
        assert capped["results"][0]["context"] == "amma total subt"
        spanning = mcp.ok("search_pdf", {"file_path": "/s.pdf", "query": "beta  Gamma"})
        assert [(r["page"], r["line"], r["match"]) for r in spanning["results"]] == [(1, 1, "beta\nGamma")]
        assert mcp.error("search_pdf", {"file_path": "/s.pdf", "query": "  "})["code"] == "invalid_argument"


@pytest.mark.parametrize("mode", MODES)
def test_create_pdf_round_trips_non_latin_text(world, mode):
    content = [
        {"type": "heading", "text": "Отчёт — Ελληνικά", "level": 1},
        {"type": "paragraph", "text": "Arabic: مرحبا بالعالم. Chinese: 你好世界. <b>not markup</b>"},
        {"type": "bullets", "items": ["první", "δεύτερο"]},
        {"type": "table", "rows": [["Region", "Revenue"], ["EMEA", 1200]], "header": True},
        {"type": "page_break"},
        {"type": "numbered_list", "items": ["after the break"]},
    ]
    with mode_session("pdfs", world, mode) as mcp:
        created = mcp.ok(
            "create_pdf",
            {"directory": "/Out", "file_name": "uni", "content": content, "metadata": {"title": "Unicode"}},
        )
        assert created["file_path"] == "/Out/uni.pdf" and created["pages"] == 2
        pages = mcp.ok("read_pdf_pages", {"file_path": "/Out/uni.pdf"})["pages"]
        assert (
            mcp.error("create_pdf", {"directory": "/Out", "file_name": "uni.pdf", "content": content})["code"]
            == "already_exists"
        )
        bad = mcp.error(
            "create_pdf", {"directory": "/Out", "file_name": "x.pdf", "content": [{"type": "video"}]}
        )
        assert bad["code"] == "invalid_argument"
    first = pages[0]["text"]
    for expected in (
        "Отчёт — Ελληνικά",
        "مرحبا بالعالم",
        "你好世界",
        "<b>not markup</b>",
        "první",
        "δεύτερο",
        "EMEA",
        "1200",
    ):
        assert expected in first, expected
    assert "after the break" in pages[1]["text"]
    document = pymupdf.open(world.fs_root / "Out/uni.pdf")
    assert document.metadata["title"] == "Unicode"
    fonts = {font[3] for font in document.get_page_fonts(0)}
    assert all(font[1] in ("ttf", "cff", "otf") for font in document.get_page_fonts(0)), (
        fonts
    )  # embedded, not base-14
    assert (world.fs_root / "Out/uni.pdf").stat().st_size < 400_000  # fonts are subset


@pytest.mark.parametrize("mode", MODES)
def test_images_and_page_rendering(world, mode):
    document = pymupdf.open()
    page = document.new_page()
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), (200, 30, 30)).save(buffer, format="PNG")
    page.insert_image(pymupdf.Rect(72, 72, 200, 136), stream=buffer.getvalue())
    page.insert_text((72, 200), "Figure 1", fontsize=12)
    document.save(world.fs_root / "fig.pdf")
    with mode_session("pdfs", world, mode) as mcp:
        listed = mcp.ok("read_pdf_pages", {"file_path": "/fig.pdf"})["pages"][0]
        assert listed["images"][0]["annotation"] == "page1_image1" and listed["images"][0]["width"] == 64
        result = mcp.call("read_image", {"file_path": "/fig.pdf", "annotation": "page1_image1"})
        image = [block for block in result.content if getattr(block, "type", "") == "image"][0]
        decoded = Image.open(io.BytesIO(base64.b64decode(image.data)))
        assert decoded.size == (64, 32) and decoded.getpixel((5, 5))[:3] == (200, 30, 30)
        assert (
            mcp.error("read_image", {"file_path": "/fig.pdf", "annotation": "page1_image2"})["code"]
            == "not_found"
        )
        assert (
            mcp.error("read_image", {"file_path": "/fig.pdf", "annotation": "logo"})["code"]
            == "invalid_argument"
        )
        rendered = mcp.call("read_page_as_image", {"file_path": "/fig.pdf", "page_number": 1, "dpi": 72})
        assert rendered.structured_content["width"] == 595
        png = [block for block in rendered.content if getattr(block, "type", "") == "image"][0]
        assert base64.b64decode(png.data)[:8] == b"\x89PNG\r\n\x1a\n"
        assert (
            mcp.error("read_page_as_image", {"file_path": "/fig.pdf", "page_number": 2})["code"]
            == "invalid_argument"
        )


@pytest.mark.parametrize("mode", MODES)
def test_corrupt_protected_and_wrong_files_fail_clearly(world, mode):
    locked = pymupdf.open()
    locked.new_page().insert_text((72, 72), "classified")
    locked.save(
        world.fs_root / "locked.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="pw", owner_pw="owner"
    )
    world.file("broken.pdf", b"%PDF-1.7\n garbage without objects")
    world.file("notes.txt", "hello")
    with mode_session("pdfs", world, mode) as mcp:
        error = mcp.error("read_pdf_pages", {"file_path": "/locked.pdf"})
        assert error["code"] == "unsupported" and "password-protected" in error["message"]
        assert (
            mcp.error("search_pdf", {"file_path": "/locked.pdf", "query": "classified"})["code"]
            == "unsupported"
        )
        broken = mcp.error("read_pdf_pages", {"file_path": "/broken.pdf"})
        assert broken["code"] == "bad_data" and str(world.fs_root) not in broken["message"]
        assert mcp.error("read_pdf_pages", {"file_path": "/notes.txt"})["code"] == "unsupported"
        assert mcp.error("read_pdf_pages", {"file_path": "/nope.pdf"})["code"] == "not_found"
        # Still healthy afterwards.
        assert (
            mcp.ok(
                "create_pdf",
                {"directory": "/", "file_name": "ok.pdf", "content": [{"type": "paragraph", "text": "fine"}]},
            )["pages"]
            == 1
        )


def test_many_images_on_a_page_are_capped(world):
    document = pymupdf.open()
    page = document.new_page()
    for i in range(55):
        buffer = io.BytesIO()
        Image.new("RGB", (4, 4), (i, 0, 0)).save(buffer, format="PNG")
        x, y = 20 + (i % 10) * 50, 20 + (i // 10) * 50
        page.insert_image(pymupdf.Rect(x, y, x + 40, y + 40), stream=buffer.getvalue())
    document.save(world.fs_root / "tiles.pdf")
    with mode_session("pdfs", world, "individual") as mcp:
        images = mcp.ok("read_pdf_pages", {"file_path": "/tiles.pdf"})["pages"][0]["images"]
        assert len(images) == 51 and images[-1] == {"more_images": 5}
        assert (
            mcp.call("read_image", {"file_path": "/tiles.pdf", "annotation": "page1_image55"}).is_error
            is False
        )


def test_every_pymupdf_use_holds_the_one_lock(world, monkeypatch):
    """PyMuPDF does not support threads (MuPDF's context is shared by the process; two threads in
    it at once corrupt memory). Tool bodies and the grader's extraction run in worker threads of
    one process, so each must hold atoll.formats.pdf.MUPDF_LOCK whenever it opens a document."""
    from atoll.formats.pdf import MUPDF_LOCK
    from grader.extract import extract

    _text_pdf(world.fs_root / "report.pdf", ["Quarterly revenue rose", "Costs fell"])
    data = (world.fs_root / "report.pdf").read_bytes()
    real_open, opened, unlocked = pymupdf.open, [], []

    def watched_open(*args, **kwargs):
        opened.append(1)
        if not MUPDF_LOCK._is_owned():
            unlocked.append("".join(traceback.format_stack(limit=6)))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(pymupdf, "open", watched_open)
    with mode_session("pdfs", world, "individual") as mcp:
        mcp.ok("read_pdf_pages", {"file_path": "/report.pdf"})
        mcp.ok("search_pdf", {"file_path": "/report.pdf", "query": "revenue"})
        mcp.call("read_page_as_image", {"file_path": "/report.pdf", "page_number": 1, "dpi": 36})
        mcp.ok(
            "create_pdf",
            {"directory": "/", "file_name": "made.pdf", "content": [{"type": "paragraph", "text": "x"}]},
        )
    extract("/fresh.pdf", data + b"\n%fresh")  # new bytes: extracted, not taken from the cache
    assert len(opened) >= 5
    assert unlocked == [], unlocked[0]
