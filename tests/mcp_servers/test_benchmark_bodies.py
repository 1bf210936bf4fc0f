"""benchmarks/tool_bodies.py keeps working (a few calls; no timing is asserted here)."""

from __future__ import annotations

from tests.benchmark_scripts import load_benchmark


def test_tool_bodies_runs_each_operation_and_its_floor(capsys):
    tool_bodies = load_benchmark("tool_bodies")
    assert tool_bodies.main(["--calls", "3", "--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for operation in ("list_files", "read_text_file", "resolve+read"):
        row = next(line.split() for line in lines if line.split()[:1] == [operation])
        body, floor = float(row[1]), float(row[2])
        assert body > 0 and floor > 0
