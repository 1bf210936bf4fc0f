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

from tests.fresh_interpreter import run_cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("litellm", "fastmcp", "mcp", "sqlalchemy", "pandas", "agents_runner", "environment", "orchestrator")


def _run(args: list[str], watch: tuple[str, ...] = HEAVY) -> dict:
    return run_cli(args, watch, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["agent", "run", "--help"],
        ["env", "serve", "--help"],
        ["grade", "--help"],
        ["judge", "calibrate", "--help"],
    ],
    ids=["root", "run", "agent-run", "env-serve", "grade", "judge-calibrate"],
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


def test_a_dry_run_and_its_resume_import_neither_litellm_nor_scipy(tmp_path: Path) -> None:
    # The instant executor calls no model: no preflight, so no model client; the report's
    # McNemar test is computed without scipy.stats.
    import yaml

    from tests.atoll.factories import make_task, write_benchmark

    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t1"), make_task("t2")])
    spec = {
        "name": "dry", "benchmark": str(benchmark), "executor": "instant",
        "agents": [{"name": "a", "agent": "react_toolbelt", "model": "openai/x"},
                   {"name": "b", "agent": "react_toolbelt", "model": "openai/y"}],
        "store": str(tmp_path / "store.db"), "output_dir": str(tmp_path / "out"),
        "artifacts": (tmp_path / "artifacts").as_uri(),
    }  # fmt: skip
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    for expected in ("4 run now", "0 run now"):  # the run, then a resume with nothing left to do
        report = _run(["run", str(path), "--quiet"], watch=("litellm", "scipy.stats"))
        assert report["code"] == 0, report["stderr"]
        assert expected in report["stdout"]
        assert report["imported"] == []


def test_importing_atoll_loads_a_contract_only_when_it_is_used() -> None:
    code = (
        "import json, sys, atoll\n"
        "before = [m for m in ('atoll.benchmark', 'atoll.experiment', 'yaml') if m in sys.modules]\n"
        "from atoll import Benchmark, TrialSpec, trial_id, __version__\n"
        "from atoll.benchmark import Benchmark as Same\n"
        "print(json.dumps({'before': before, 'same': Benchmark is Same, 'all': sorted(atoll.__all__) == "
        "sorted(n for n in atoll.__all__ if getattr(atoll, n, None) is not None)}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {"before": [], "same": True, "all": True}
