"""A regrade whose judge failed part-way: the trials it left ungradeable are judged again by
the next `atoll regrade`, not counted as done."""

from __future__ import annotations

import asyncio
import json

import pytest

from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.regrade import regrade_run
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.orchestrator.judge_only import judge_only_experiment


@pytest.mark.slow  # a run of the sample world and two regrades, one through the judge's retries
def test_a_trial_left_ungradeable_by_a_failing_judge_is_judged_again_by_the_next_regrade(tmp_path):
    up = {"judge-b": False}

    def judge(request: dict) -> dict:
        model = str(request.get("model"))
        if "judge-b" in model and not up["judge-b"]:
            return {"status": 503, "headers": {"Retry-After": "0"}}
        verdict = "not_met" if "judge-b" in model else "met"
        return {"content": json.dumps({"rationale": f"{model} says {verdict}", "verdict": verdict})}

    with ScriptedLLM(judge) as server:
        spec = judge_only_experiment(tmp_path, "jr", {"model": "openai/judge-a", "api_base": server.api_base})
        asyncio.run(run_experiment(spec, quiet=True))
        store = TrialStore(spec.store)
        failed = asyncio.run(regrade_run(store, "jr", judge_model="openai/judge-b", api_base=server.api_base))
        [(_spec, result, _state, _attempts)] = store.results("jr")
        assert failed["trials_regraded"] == 1 and result.outcome.value == "ungradeable"
        assert result.judge_id == failed["judge"]["id"] and result.criteria_ungradeable

        up["judge-b"] = True
        # Before: "0 trials regraded (1 already graded by it)", the trial ungradeable for good.
        again = asyncio.run(regrade_run(store, "jr"))
        [(_spec, result, _state, _attempts)] = store.results("jr")
        assert again["trials_regraded"] == 1 and again["trials_already_graded"] == 0
        assert result.outcome.value == "fail" and not result.criteria_ungradeable

        # Decided now: the next regrade has nothing left to do.
        done = asyncio.run(regrade_run(store, "jr"))
        assert done["trials_regraded"] == 0 and done["trials_already_graded"] == 1
        store.dispose()
