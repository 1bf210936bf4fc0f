"""The type checker (mypy, configured in pyproject.toml's [tool.mypy]) passes: strict on the
contracts and the kit, standard on the rest of the modules it lists."""

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_mypy_reports_no_errors_on_the_configured_modules(tmp_path):
    before = _children_cpu_s()
    # A fresh cache in a temporary folder: the repository gets no .mypy_cache, and the run is
    # the cold one CI makes (about 15 s of CPU).
    found = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert found.returncode == 0, f"mypy found type errors:\n{found.stdout}{found.stderr}"
    # CPU time, not wall time, so that a busy machine does not fail it: a library analysed
    # instead of skipped ([[tool.mypy.overrides]] follow_imports = "skip") costs a minute more.
    spent = _children_cpu_s() - before
    assert spent < 40, f"mypy took {spent:.0f} s of CPU from a cold cache; keep the check under a minute"
