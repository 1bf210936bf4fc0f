"""A file's content is extracted once: the diff and the checks of a trial, and every trial of a
task, read the same bytes; each caller gets a result of its own, and nothing else is shared."""

from __future__ import annotations

import sys
import uuid

from grader.extract import ExtractOptions, extract
from tests.grader.factories import docx


def test_the_same_bytes_are_extracted_once_into_results_of_their_own(monkeypatch):
    marker = uuid.uuid4().hex  # a content no other test extracted in this process
    data = docx([f"Revenue grew 12% ({marker})."])
    opened = []
    extract_module = sys.modules["grader.extract"]
    document = extract_module._document
    monkeypatch.setattr(extract_module, "_document", lambda *a: opened.append(1) or document(*a))

    first = extract("/Reports/q3.docx", data)
    first.parts[0].text = "changed by its caller"
    second = extract("/Reports/q3.docx", data)
    assert marker in second.text() and "changed by its caller" not in second.text()
    assert len(opened) == 1

    other = extract("/Reports/q3.docx", docx([f"Revenue fell ({marker})."]))
    assert "fell" in other.text() and len(opened) == 2  # another content is its own
    extract("/Reports/q3.docx", data, ExtractOptions(ocr=False))
    assert len(opened) == 3  # other options are another extraction


def test_a_failed_extraction_is_tried_again(monkeypatch):
    data = docx([f"Margins ({uuid.uuid4().hex})."])
    extract_module = sys.modules["grader.extract"]
    document = extract_module._document
    failures = [MemoryError("reader ran out")]

    def flaky(*arguments):
        if failures:
            raise failures.pop()
        return document(*arguments)

    monkeypatch.setattr(extract_module, "_document", flaky)
    assert "MemoryError" in extract("/Reports/m.docx", data).error
    assert "Margins" in extract("/Reports/m.docx", data).text()
