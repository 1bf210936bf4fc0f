"""The judge's reasoning and cached tokens are recorded in the grade as providers bill them
(real litellm against the scripted OpenAI-compatible server and the Gemini emulator)."""

from __future__ import annotations

import json

from atoll.grade import Verdict
from atoll.judge import JudgeConfig
from atoll.testing.scripted_llm import ScriptedLLM
from grader import grade_trial
from tests.grader import factories as f

from .test_judge import config

USAGE = {
    "prompt_tokens": 3000,
    "completion_tokens": 300,
    "prompt_tokens_details": {"cached_tokens": 2048},
    "completion_tokens_details": {"reasoning_tokens": 250},
}
MET = {"content": json.dumps({"rationale": "the answer states 40", "verdict": "met"}), "usage": USAGE}


async def test_the_grade_records_the_judges_reasoning_and_cached_tokens(world_pair):
    before, after = world_pair
    criteria = [
        {
            "verifier_id": f"v{n}",
            "criteria": "States profit of 40",
            "grading_target": {"kind": "final_answer"},
        }
        for n in (1, 2)
    ]
    with ScriptedLLM([MET, MET]) as llm:
        grade = await grade_trial(
            f.task(criteria), before, after, f.trajectory("Profit was 40."), config(llm)
        )
    assert [c.verdict for c in grade.criteria] == [Verdict.met, Verdict.met]
    assert (grade.judge_prompt_tokens, grade.judge_completion_tokens) == (6000, 600)
    assert (grade.judge_reasoning_tokens, grade.judge_cached_tokens) == (500, 4096)


async def test_a_thinking_gemini_judges_thoughts_and_cached_content_are_counted():
    from grader.judge import judge
    from tests.grader.test_judge_parameters import _blocks
    from tests.providers.gemini import GeminiEmulator

    verdict = {
        "content": json.dumps({"rationale": "it does", "verdict": "met"}),
        "usage": {"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "candidatesTokenCount": 40},
    }
    with GeminiEmulator([verdict]) as emu:
        result = await judge(
            JudgeConfig(
                model="gemini/gemini-3-flash-preview", api_base=emu.api_base, api_key="t", thinking="high"
            ),
            _blocks(),
        )
        assert emu.rejections == []
    assert result.verdict is Verdict.met, result.error
    assert result.cached_tokens == 1024 and result.reasoning_tokens > 0  # the emulator's thoughtsTokenCount
    assert result.completion_tokens == 40 + result.reasoning_tokens
