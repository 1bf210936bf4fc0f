"""Regrading stored trials: new verdicts with provenance, unchanged evidence free with a cache."""

from __future__ import annotations

import json

from atoll.grade import Grade, Verdict
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig, VerdictCache, grade_trial, regrade
from tests.grader import factories as f

MET = {"content": json.dumps({"rationale": "ok", "verdict": "met"})}
NOT_MET = {"content": json.dumps({"rationale": "no", "verdict": "not_met"})}


async def test_regrade_reports_old_and_new_verdicts(world_pair, tmp_path):
    before, after = world_pair
    task = f.task(
        [
            {"verifier_id": "v1", "criteria": "criterion-alpha"},
            {"verifier_id": "v2", "criteria": "criterion-beta"},
        ]
    )
    trajectory = f.trajectory("Profit 40")
    cache = VerdictCache(tmp_path / "cache")

    def judges(request: dict) -> dict:  # criteria are judged concurrently: answer by content
        first = request["model"] == "a"
        return NOT_MET if first and "criterion-beta" in request["messages"][-1]["content"] else MET

    with ScriptedLLM(judges) as llm:
        old = await grade_trial(
            task,
            before,
            after,
            trajectory,
            JudgeConfig(model="openai/a", api_base=llm.api_base, api_key="x"),
            cache,
        )
        stored = Grade.model_validate_json(old.model_dump_json(by_alias=True))

        # Same judge, same prompt, same evidence: everything comes from the cache.
        asked = len(llm.requests)
        judge = JudgeConfig(model="openai/a", api_base=llm.api_base, api_key="x")
        same, report = await regrade(task, before, after, trajectory, stored, judge, cache)
        assert len(llm.requests) == asked
        assert report.changed == 0 and all(c.cached for c in report.criteria)

        # A new judge model re-judges and the report says what moved.
        judge = JudgeConfig(model="openai/b", api_base=llm.api_base, api_key="x")
        new, report = await regrade(task, before, after, trajectory, stored, judge, cache)
    moved = {c.verifier_id: c for c in report.criteria}
    assert (
        moved["v2"].old_verdict is Verdict.not_met
        and moved["v2"].new_verdict is Verdict.met
        and moved["v2"].changed
    )
    assert moved["v1"].changed is False and moved["v1"].old_judge_model == "openai/a"
    assert moved["v1"].new_judge_model == "openai/b" and moved["v1"].new_prompt_version == "judge-v2"
    assert report.changed == 1 and report.old_passed is False and report.new_passed is True
    assert new.passed and new.model_dump()["regraded_from"][1]["verdict"] == "not_met"
