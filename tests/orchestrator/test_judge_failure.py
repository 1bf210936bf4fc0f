"""A judge that cannot return a verdict makes the trial ungradeable, never failed."""

import asyncio
import json

import pytest

from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.orchestrator.judge_only import judge_only_experiment


@pytest.mark.slow
def test_malformed_judge_output_gives_ungradeable_trials(tmp_path):
    with ScriptedLLM(lambda request: {"content": "I think it is fine, probably."}) as judge:
        spec = judge_only_experiment(
            tmp_path, "broken-judge", {"model": "openai/judge", "api_base": judge.api_base}
        )
        outcome = asyncio.run(run_experiment(spec, quiet=True))
        assert judge.requests  # the judge was asked, and retried
    ((_spec, result, state, _attempts),) = TrialStore(spec.store).results("broken-judge")
    assert state == "done" and result.outcome.value == "ungradeable"
    report = json.loads(outcome.report_paths["json"].read_text())
    assert report["metrics"]["overall"]["oracle"]["excluded_trials"] == {"ungradeable": 1}
    assert "ungradeable" in (outcome.report_paths["md"].read_text())
