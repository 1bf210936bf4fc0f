"""The type checker (mypy, configured in pyproject.toml's [tool.mypy]) passes: strict on the
contracts and the kit, standard on the rest of the modules it lists. What the check costs is
measured by benchmarks/typecheck.py, not timed here (docs/performance.md)."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Libraries whose own code mypy must not analyse: each would add tens of seconds of CPU to
#: every cold check (kubernetes' ~950 generated models double it) and none holds our types.
HEAVY = {"beartype.*", "kubernetes.*", "litellm.*", "numpy.*", "opentelemetry.*"}


def test_mypy_reports_no_errors_on_the_configured_modules(tmp_path):
    # A fresh cache in a temporary folder: the repository gets no .mypy_cache, and the run is
    # the cold one CI makes.
    found = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert found.returncode == 0, f"mypy found type errors:\n{found.stdout}{found.stderr}"


def test_the_heavy_libraries_stay_skipped():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    skipped = {
        module
        for override in config.get("overrides", [])
        if override.get("follow_imports") == "skip"
        for module in override["module"]
    }
    assert skipped >= HEAVY, f"analysed again: {sorted(HEAVY - skipped)}"
