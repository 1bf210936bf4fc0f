"""Every generated document opens with the standard library for its type, with the variety asked for."""

from __future__ import annotations

import csv
import os
import subprocess
import zipfile
from collections import Counter

import docx
import openpyxl
import pymupdf
import pytest
from pptx import Presentation

from .conftest import CONSULTING, DEAL, fs

WORLDS = [CONSULTING, DEAL]


def _files(root):
    return [p for p in (root / "filesystem").rglob("*") if p.is_file()]


@pytest.mark.parametrize("world_id", WORLDS)
def test_world_has_25_documents_of_every_kind_in_messy_nested_folders(worlds, world_id):
    files = _files(worlds[world_id])
    assert len(files) >= 25
    kinds = Counter(p.suffix for p in files)
    for suffix in (".xlsx", ".docx", ".pptx", ".pdf", ".csv"):
        assert kinds[suffix] >= 1, suffix
    assert kinds[".md"] + kinds[".txt"] >= 3
    depths = [len(p.relative_to(worlds[world_id] / "filesystem").parts) for p in files]
    assert max(depths) >= 3
    assert any(" " in p.name and "(" in p.name for p in files)


@pytest.mark.parametrize("world_id", WORLDS)
def test_every_file_opens_with_its_standard_reader(worlds, world_id):
    for path in _files(worlds[world_id]):
        if path.suffix == ".xlsx":
            assert openpyxl.load_workbook(path).sheetnames
        elif path.suffix == ".docx":
            assert docx.Document(str(path)).paragraphs
        elif path.suffix == ".pptx":
            assert len(Presentation(str(path)).slides) >= 1
        elif path.suffix == ".pdf":
            with pymupdf.open(path) as document:
                assert document.page_count >= 1
        elif path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as handle:
                rows = list(csv.reader(handle))
            assert len(rows) >= 2 and len({len(r) for r in rows}) == 1
        else:
            assert path.suffix in (".md", ".txt") and path.read_text(encoding="utf-8").strip()


@pytest.mark.parametrize(
    ("world_id", "path", "cached_value"),
    [
        (CONSULTING, "/Data/Raw/Halvorsen spend cube FY2023 (final_v3).xlsx", 1.0856),
        (DEAL, "/Valuation/Atlas comps v3 (SR).xlsx", 48.17),
    ],
)
def test_workbooks_have_tabs_formulas_formats_and_a_google_sheets_cell(worlds, world_id, path, cached_value):
    path = fs(worlds[world_id], path)
    workbook = openpyxl.load_workbook(path)
    assert len(workbook.sheetnames) >= 2
    formulas = [
        c
        for ws in workbook
        for row in ws.iter_rows()
        for c in row
        if isinstance(c.value, str) and c.value.startswith("=")
    ]
    assert len(formulas) >= 10
    assert any(
        c.number_format not in ("General",)
        for ws in workbook
        for row in ws.iter_rows(min_row=2)
        for c in row
        if c.value is not None
    )
    dummy = [c for c in formulas if "__xludf.DUMMYFUNCTION" in c.value]
    assert len(dummy) == 1
    cached = openpyxl.load_workbook(path, data_only=True)[dummy[0].parent.title][dummy[0].coordinate].value
    assert cached == pytest.approx(cached_value)


@pytest.mark.parametrize(
    ("world_id", "path", "commenter"),
    [
        (
            CONSULTING,
            "/Deliverables/Interim Report/Keystone_interim_findings_DRAFT (jm edits).docx",
            "Tomás Herrera",
        ),
        (DEAL, "/Legal/SPA/Atlas SPA draft v4 (A&K comments).docx", "Catherine Moreau"),
    ],
)
def test_docx_has_headings_tables_bold_runs_and_a_comment(worlds, world_id, path, commenter):
    path = fs(worlds[world_id], path)
    document = docx.Document(str(path))
    assert any(p.style.name.startswith("Heading") for p in document.paragraphs)
    assert document.tables
    assert any(run.bold for p in document.paragraphs for run in p.runs)
    with zipfile.ZipFile(path) as package:
        comments = package.read("word/comments.xml").decode()
    assert f'w:author="{commenter}"' in comments


@pytest.mark.parametrize(
    ("world_id", "path"),
    [
        (CONSULTING, "/Deliverables/SteerCo/Keystone SteerCo 2024-02-29 DRAFT.pptx"),
        (DEAL, "/Board/Atlas Board Update - March 2024.pptx"),
    ],
)
def test_pptx_has_title_bullets_table_and_notes(worlds, world_id, path):
    deck = Presentation(str(fs(worlds[world_id], path)))
    slides = list(deck.slides)
    assert slides[0].shapes.title.text.startswith("Project ")
    assert len(slides[1].placeholders[1].text_frame.paragraphs) >= 3
    assert any(shape.has_table for slide in slides for shape in slide.shapes)
    assert any(slide.has_notes_slide and slide.notes_slide.notes_text_frame.text for slide in slides)


@pytest.mark.parametrize(
    ("world_id", "path"),
    [
        (CONSULTING, "/Research/Industry/Food processing procurement benchmarks 2023.pdf"),
        (DEAL, "/Data Room/04 Litigation/04.3 Alder Fabrication demand letter (scan).pdf"),
    ],
)
def test_pdfs_are_multi_page_with_one_image_only_page(worlds, world_id, path):
    with pymupdf.open(fs(worlds[world_id], path)) as document:
        assert document.page_count >= 2
        image_only = [p for p in document if not p.get_text().strip() and p.get_images()]
        assert len(image_only) == 1
        assert any(p.get_text().strip() for p in document)


@pytest.mark.slow
def test_scanned_page_is_readable_by_ocr(worlds, tmp_path):
    path = fs(worlds[DEAL], "/Data Room/04 Litigation/04.3 Alder Fabrication demand letter (scan).pdf")
    with pymupdf.open(path) as document:
        page = next(p for p in document if not p.get_text().strip())
        page.get_pixmap(dpi=200).save(tmp_path / "page.png")
    text = subprocess.run(
        ["tesseract", str(tmp_path / "page.png"), "-"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    ).stdout
    assert "Alder Fabrication" in text
    assert "$1,250,000" in text
