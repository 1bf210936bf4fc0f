"""The agents runner's Dockerfile passes hadolint and ships no other service."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "agents_runner" / "Dockerfile"


def test_dockerfile_lints_clean_and_serves_the_agents_runner():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    text = DOCKERFILE.read_text()
    assert 'CMD ["atoll", "agent", "serve"]' in text
    assert "COPY grader" not in text and "COPY environment" not in text  # the agent never sees them
