"""The ``serial`` mark: under pytest-xdist such a test runs while no other test does."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_TESTS = """
import json, os, time
import pytest

def _record(name):
    started = time.monotonic()
    time.sleep(0.6)
    with open(os.environ["WINDOWS"], "a") as out:
        out.write(json.dumps([name, started, time.monotonic()]) + "\\n")

@pytest.mark.serial
def test_alone():  # first, so that both workers start at once: one with it, one with a plain test
    _record("serial")

@pytest.mark.parametrize("n", range(6))
def test_plain(n):
    _record(f"plain{n}")
"""


def test_a_serial_test_overlaps_no_other_while_plain_ones_run_in_parallel(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.serial_plugin"]\n')
    (tmp_path / "test_windows.py").write_text(_TESTS)
    windows = tmp_path / "windows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WINDOWS": str(windows)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "load",
         "-o", "addopts=", "-o", "markers=serial: alone", f"--basetemp={tmp_path / 'base'}", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    spans = {name: (start, end) for name, start, end in map(json.loads, windows.read_text().splitlines())}
    alone = spans.pop("serial")
    assert len(spans) == 6
    assert all(end <= alone[0] or start >= alone[1] for start, end in spans.values()), (alone, spans)
    # Without the lock both workers run plain tests side by side: the check above can fail.
    assert any(a[0] < b[1] and b[0] < a[1] for x, a in spans.items() for y, b in spans.items() if x < y)
