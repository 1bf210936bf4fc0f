"""A judge that cannot return a verdict makes the trial ungradeable, never failed."""

import asyncio
import json

import pytest

from atoll.experiment import ExperimentSpec
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.shared_sample import fresh_sample_benchmark


@pytest.mark.slow
def test_malformed_judge_output_gives_ungradeable_trials(tmp_path):
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    judge_only = next(t["task_id"] for t in tasks if any(c.get("check") is None for c in t["rubric"]))
    with ScriptedLLM(lambda request: {"content": "I think it is fine, probably."}) as judge:
        spec = ExperimentSpec.model_validate(
            {
                "name": "broken-judge",
                "benchmark": str(benchmark),
                "tasks": {"ids": [judge_only]},
                "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
                "judge": {"model": "openai/judge", "api_base": judge.api_base},
                "store": str(tmp_path / "store.db"),
                "artifacts": (tmp_path / "artifacts").as_uri(),
                "output_dir": str(tmp_path / "out"),
            }
        )
        outcome = asyncio.run(run_experiment(spec, quiet=True))
        assert judge.requests  # the judge was asked, and retried
    ((_spec, result, state, _attempts),) = TrialStore(spec.store).results("broken-judge")
    assert state == "done" and result.outcome.value == "ungradeable"
    report = json.loads(outcome.report_paths["json"].read_text())
    assert report["metrics"]["overall"]["oracle"]["excluded_trials"] == {"ungradeable": 1}
    assert "ungradeable" in (outcome.report_paths["md"].read_text())
