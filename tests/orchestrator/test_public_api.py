"""The orchestrator's public Python API: importable from the package, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import yaml

import orchestrator
from atoll_sample import generate_sample_benchmark


def test_importing_the_package_loads_none_of_the_machinery():
    probe = (
        "import sys, orchestrator; "
        "heavy = [m for m in ('orchestrator.runner', 'orchestrator.store', 'orchestrator.report', 'litellm') "
        "if m in sys.modules]; print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


async def test_an_experiment_runs_and_reports_through_the_package_api(tmp_path):
    benchmark = generate_sample_benchmark(tmp_path / "bench")
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "name": "api",
                "benchmark": str(benchmark),
                "agents": [
                    {
                        "name": "dry",
                        "agent": "replay",
                        "model": "replay",
                        "config": {"instant_pass_rate": 1.0},
                    }
                ],
                "runs": 2,
                "executor": "instant",
                "store": f"sqlite:///{tmp_path / 'atoll.db'}",
                "artifacts": (tmp_path / "artifacts").as_uri(),
                "output_dir": str(tmp_path / "out"),
            }
        )
    )
    spec = orchestrator.load_experiment(experiment)
    outcome = await orchestrator.run_experiment(spec, quiet=True)
    assert isinstance(outcome, orchestrator.RunOutcome) and outcome.counts["done"] == outcome.planned > 0
    report = orchestrator.build_report(orchestrator.TrialStore(spec.store), "api")
    assert report["metrics"]["overall"]["dry"]["pass_at_1"]["value"] == 1.0
    assert set(orchestrator.__all__) <= set(dir(orchestrator))
