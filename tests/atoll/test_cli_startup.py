"""The CLI answers help and bad input without importing a service's heavy libraries.

``atoll --help``, a command's ``--help``, an argument error and ``atoll agent run`` with a
wrong --task-id must not import litellm, fastmcp, SQLAlchemy or pandas (seconds of CPU
together): each command imports its service inside the function, after checking its input.
A fresh interpreter per case reports which of them it imported by the time it exited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("litellm", "fastmcp", "mcp", "sqlalchemy", "pandas", "agents_runner", "environment", "orchestrator")

_PROBE = """
import json, sys
sys.argv = ["atoll", *json.loads(sys.argv[1])]
from atoll.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "imported": [m for m in %(heavy)r if m in sys.modules]}))
"""


def _run(args: list[str]) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE % {"heavy": HEAVY}, json.dumps(args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    report["stderr"] = completed.stderr
    return report


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["agent", "run", "--help"],
        ["env", "serve", "--help"],
        ["grade", "--help"],
    ],
    ids=["root", "run", "agent-run", "env-serve", "grade"],
)
def test_help_imports_no_service_library(args: list[str]) -> None:
    report = _run(args)
    assert report["code"] == 0
    assert report["imported"] == []


def test_an_argument_error_imports_no_service_library() -> None:
    report = _run(["run"])  # the experiment file is missing
    assert report["code"] == 2
    assert "experiment" in report["stderr"].lower()
    assert report["imported"] == []


def test_agent_run_with_a_wrong_task_id_fails_before_importing_the_runner(tmp_path: Path) -> None:
    from tests.shared_sample import fresh_sample_benchmark

    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    report = _run(
        ["agent", "run", "--output", str(tmp_path / "t.json"), "--gateway-url", "http://127.0.0.1:9/mcp",
         "--model", "openai/m", "--benchmark", str(benchmark), "--task-id", "no-such-task"]
    )  # fmt: skip
    assert report["code"] == 2
    assert "no-such-task" in report["stderr"] and "no such task" in report["stderr"]
    assert report["imported"] == []
    assert not (tmp_path / "t.json").exists()
