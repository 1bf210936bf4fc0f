"""OCR is run once per content in a process: every trial's world is a fresh copy of the same
files, and the agent's PDF tools and the grader of each trial read the same scanned pages."""

from __future__ import annotations

import os
import shutil
import stat
from collections import OrderedDict

import pymupdf
import pytest

from atoll.formats import pdf
from tests.mcp_servers.test_pdfs import _scanned_pdf


@pytest.fixture
def counted_tesseract(tmp_path, monkeypatch):
    """A tesseract that counts its runs in a file; this test's own OCR cache."""
    real = shutil.which("tesseract")
    assert real, "tesseract is installed by scripts/setup.sh"
    runs = tmp_path / "runs"
    wrapper = tmp_path / "tesseract"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{runs}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(pdf, "_OCR_CACHE", OrderedDict())
    return str(wrapper), lambda: len(runs.read_text().splitlines()) if runs.exists() else 0


def _read_page_one(path, tesseract: str) -> pdf.PageText:
    data = path.read_bytes()
    info = os.stat(path)
    source = pdf.PdfSource(str(path), (info.st_ino, info.st_mtime_ns, info.st_size), data)
    with pymupdf.open(stream=data, filetype="pdf") as document:
        return pdf.Extractor(tesseract=tesseract).page_text(document, source, 1)


def test_copies_of_a_scanned_pdf_in_two_worlds_are_recognised_once(tmp_path, counted_tesseract):
    tesseract, runs = counted_tesseract
    first_world, second_world = tmp_path / "trial-1", tmp_path / "trial-2"
    first_world.mkdir()
    second_world.mkdir()
    _scanned_pdf(first_world / "scan.pdf")
    shutil.copy(first_world / "scan.pdf", second_world / "scan.pdf")

    first = _read_page_one(first_world / "scan.pdf", tesseract)
    second = _read_page_one(second_world / "scan.pdf", tesseract)
    assert first.engine == second.engine == "ocr" and "4,250" in first.text
    assert second.text == first.text
    assert runs() == 1

    # other bytes at the same path are recognised again
    (first_world / "scan.pdf").unlink()
    _scanned_pdf(first_world / "scan.pdf")
    with pymupdf.open(first_world / "scan.pdf") as document:
        document.set_metadata({"title": "a later scan"})
        document.save(first_world / "later.pdf")
    assert "4,250" in _read_page_one(first_world / "later.pdf", tesseract).text
    assert runs() == 2
