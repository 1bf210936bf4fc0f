"""LibreOffice computes a workbook's bytes once per engine: every trial's world is a fresh
copy of the same files, so the agents' reads of a seed workbook are the same computation.
Each caller gets values of its own; volatile formulas are computed every time."""

from __future__ import annotations

import uuid

import pytest

from atoll.formats.libreoffice import shared_engine
from tests.grader.factories import xlsx

pytestmark = pytest.mark.slow


def test_the_same_workbook_bytes_are_computed_once_and_each_caller_gets_its_own_values():
    engine = shared_engine()  # the spreadsheet tools' engine
    marker = uuid.uuid4().hex  # bytes no other test computed in this process
    data = xlsx({"S": [[7, "=A1*3", marker]]})
    calls, cached = engine.stats.calls, engine.stats.cached

    first = engine.compute(data)
    assert first["S"][(1, 2)] == ("n", 21)
    first["S"][(1, 2)] = ("n", -1)  # a caller changing what it got (the Google-fallback path does)
    second = engine.compute(data)
    assert second["S"][(1, 2)] == ("n", 21)
    assert (engine.stats.calls, engine.stats.cached) == (calls + 1, cached + 1)

    other = engine.compute(xlsx({"S": [[8, "=A1*3", marker]]}))
    assert other["S"][(1, 2)] == ("n", 24) and engine.stats.calls == calls + 2


def test_workbooks_with_volatile_functions_are_computed_every_time():
    engine = shared_engine()
    data = xlsx({"S": [["=RAND()", "=TODAY()", uuid.uuid4().hex]]})
    calls = engine.stats.calls
    engine.compute(data)
    engine.compute(data)
    assert engine.stats.calls == calls + 2
