"""The tree stays formatted and linted as CI enforces it: `ruff format --check` and `ruff check`
over the whole checkout (the settings are pyproject.toml's [tool.ruff])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_every_python_file_is_ruff_formatted():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr


def test_the_tree_passes_ruff_check():
    result = _ruff("check", ".")
    assert result.returncode == 0, "fix what `ruff check .` reports:\n" + result.stdout + result.stderr
