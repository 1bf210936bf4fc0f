"""Hostile office and PDF files in a graded world: bounded, recorded, never fatal.

Small bombs with the limits lowered to match keep these fast; one test reads a real
~100 KiB docx bomb (1 M paragraphs) in a child process and measures its memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import httpx
import pytest

from atoll.formats import bounds
from atoll.testing import bombs
from grader import ExtractOptions, Snapshot, diff_snapshots, extract
from tests.child_memory import run_measured
from tests.grader import factories as f


@pytest.fixture
def limits(monkeypatch):
    def lower(**changes: int) -> None:
        monkeypatch.setattr(bounds, "LIMITS", dataclasses.replace(bounds.LIMITS, **changes))

    return lower


def test_a_docx_bomb_is_recorded_as_unreadable_naming_file_and_limit(limits):
    limits(max_xml_tags=50_000)
    result = extract("/Reports/memo.docx", bombs.docx_paragraph_bomb(20_000))
    assert (
        result.error
        == "too_large: /Reports/memo.docx: its XML holds more than 50000 tags (limit 50000 tags per file)"
    )
    assert result.parts == [] and "could not extract docx content: too_large" in result.text()


def test_an_entity_bomb_is_refused_before_parsing():
    result = extract("/laughs.docx", bombs.docx_billion_laughs())
    assert result.error.startswith("too_large: /laughs.docx: part word/document.xml declares a DTD")


def test_a_document_with_too_many_paragraphs_is_refused(limits):
    limits(max_blocks=500)
    result = extract("/long.docx", bombs.docx_paragraph_bomb(600))
    assert result.error == "too_large: /long.docx: has more than 500 paragraphs and table cells (limit 500)"
    assert extract("/short.docx", bombs.docx_paragraph_bomb(400)).error is None


def test_a_deck_with_too_many_slides_is_refused(limits):
    limits(max_slides=2)
    deck = f.pptx([("one", [], None), ("two", [], None), ("three", [], None)])
    assert extract("/deck.pptx", deck).error == "too_large: /deck.pptx: has 3 slides (limit 2)"


def test_a_lying_media_part_makes_the_deck_unreadable_without_inflating_it():
    result = extract("/deck.pptx", bombs.pptx_with_media_bomb(64 << 20, lie=True))
    assert result.error == "BadZipFile: Bad CRC-32 for file 'ppt/media/image99.png'"


def test_a_workbook_is_read_up_to_the_extracted_row_limit(limits):
    limits(max_extracted_rows=1_000)
    result = extract("/rows.xlsx", bombs.xlsx_row_bomb(5_000))
    (sheet,) = result.parts
    assert len(sheet.cells) == 1_000 and sheet.text.endswith("[sheet truncated after row 1000]")


def test_a_pdf_stream_bomb_is_refused_and_long_pdfs_are_cut(limits):
    limits(max_pdf_stream_bytes=1 << 20, max_pdf_pages=5)
    bomb = extract("/bomb.pdf", bombs.pdf_stream_bomb(4 << 20))
    assert (
        bomb.error
        == "too_large: /bomb.pdf: stream 4 decodes to more than 1048576 bytes (limit 1048576 per stream)"
    )
    long = extract("/long.pdf", bombs.pdf_many_pages(8))
    assert [part.name for part in long.parts] == [f"page {n}" for n in range(1, 6)]
    assert long.note == "only the first 5 of 8 pages read (limit per file)"


def test_an_800_kib_docx_bomb_stays_small_in_memory():
    """The issue's file: ~800 KiB that unpacks to ~280 MiB of paragraphs (it took the grader
    past 2 GiB). A 1 M-paragraph instance (~100 KiB) is refused at the tag count."""
    result = run_measured(
        "from atoll.testing.bombs import docx_paragraph_bomb\nfrom grader.extract import extract\n"
        "data = docx_paragraph_bomb(1_000_000)",
        "outcome = extract('/bomb.docx', data).error",
        limit_mib=2048,
    )
    assert result["outcome"].startswith("too_large: /bomb.docx: its XML holds more than")
    assert result["peak_mib"] < 200 and result["seconds"] < 20


def test_grading_goes_on_past_a_bomb(tmp_path, limits):
    limits(max_xml_tags=50_000)
    before = Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"}))
    after = Snapshot(
        f.write_snapshot(
            tmp_path / "a.tar.gz",
            {
                "filesystem/a.txt": "b",
                "filesystem/Reports/bomb.docx": bombs.docx_paragraph_bomb(20_000),
                "filesystem/Reports/q3.docx": f.docx(["Revenue grew 12%."]),
            },
        )
    )
    world = diff_snapshots(before, after)
    artifacts = {artifact.id: artifact for artifact in world.artifacts}
    assert artifacts["file:/Reports/bomb.docx"].error.startswith(
        "too_large: /Reports/bomb.docx: its XML holds"
    )
    assert "Revenue grew 12%." in artifacts["file:/Reports/q3.docx"].text
    assert artifacts["file:/a.txt"].error is None


@pytest.mark.slow
def test_health_answers_while_a_large_file_is_read(tmp_path):
    """Extraction runs off the event loop: /health answers in < 100 ms meanwhile (python-docx
    holds the GIL in pieces; the loop still gets its turn every few milliseconds)."""
    from grader.service import create_app

    long = bombs.docx_paragraph_bomb(30_000)  # within the bounds, ~1-3 s to read
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "a", "filesystem/long.docx": long})
    task = f.task([{"verifier_id": "v", "criteria": "c", "check": {"kind": "answer_regex", "pattern": "x"}}])

    async def scenario() -> tuple[list[float], int]:
        transport = httpx.ASGITransport(app=create_app(None))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            grading = asyncio.create_task(
                client.post(
                    "/grade",
                    data={"task": task.model_dump_json(), "judge": '{"model": null}'},
                    files={"before": before.read_bytes(), "after": after.read_bytes()},
                    timeout=120,
                )
            )
            latencies = []
            while not grading.done():
                began = time.perf_counter()
                assert (await client.get("/health")).status_code == 200
                latencies.append(time.perf_counter() - began)
                await asyncio.sleep(0.02)
            return latencies, (await grading).status_code

    latencies, status = asyncio.run(scenario())
    assert status == 200 and len(latencies) >= 5
    assert max(latencies) < 0.1, latencies


def test_options_do_not_change_the_bounds():
    """Bounds hold whatever the extraction options (the recalculation path included)."""
    options = ExtractOptions(recalculate=True)
    assert extract(
        "/laughs.xlsx", bombs.xlsx_with_sheet([bombs.billion_laughs(), b"<worksheet/>"]), options
    ).error.startswith("too_large: /laughs.xlsx: part xl/worksheets/sheet1.xml declares a DTD")


def test_a_bound_crossed_while_looking_for_formulas_is_reported_once(limits):
    """The formula scan before recalculation raises the bound instead of reading twice."""
    from atoll.formats.bounds import InputTooLarge
    from atoll.formats.libreoffice import with_computed_values

    limits(max_shared_strings=1_000)
    with pytest.raises(InputTooLarge, match=r"^/s\.xlsx: more than 1000 shared strings"):
        with_computed_values(bombs.xlsx_shared_strings_bomb(2_000), name="/s.xlsx")
    result = extract("/strings.xlsx", bombs.xlsx_shared_strings_bomb(2_000))
    assert result.error == "too_large: /strings.xlsx: more than 1000 shared strings (limit 1000)"


@pytest.mark.slow
def test_libreoffice_gets_no_workbook_past_the_tag_limit(limits):
    """Formulas without cached values are computed by LibreOffice, which loads the whole
    workbook: past the tag limit the workbook is read as it is instead."""
    from atoll.formats.libreoffice import with_computed_values
    from atoll.formats.xlsx import has_uncached_formulas

    workbook = f.xlsx({"Data": [[1, 2, "=A1+B1"]] * 50})
    assert has_uncached_formulas(workbook)
    assert with_computed_values(workbook) != workbook  # computed below the limit
    limits(max_xml_tags=500)
    larger = f.xlsx({"Data": [[1, 2, "=A1+B1"]] * 51})
    assert with_computed_values(larger) is larger
