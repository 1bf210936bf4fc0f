"""The judge asks each model only for what it accepts, and a misconfigured judge stops
`atoll grade` with the reason instead of making every criterion "ungradeable" (real CLI,
real litellm, a scripted OpenAI-compatible server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from atoll.grade import Verdict
from atoll.judge import JudgeConfig
from atoll.testing.scripted_llm import TEMPERATURE_UNSUPPORTED, ScriptedLLM
from tests.grader import factories as f

MET = {"content": json.dumps({"rationale": "the report states 42", "verdict": "met"})}
UNSUPPORTED_TEMPERATURE = {"status": 400, "body": TEMPERATURE_UNSUPPORTED}


def _atoll(*args: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-test",
        "ANTHROPIC_API_KEY": "test",
    }
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def _grade(tmp_path, *judge: str) -> subprocess.CompletedProcess:
    before = f.write_zip(tmp_path / "before.zip", {"filesystem/report.txt": "draft"})
    after = f.write_zip(tmp_path / "after.zip", {"filesystem/report.txt": "final figures: 42"})
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps([{"verifier_id": "v1", "criteria": "The report states 42"}]))
    return _atoll(
        "grade",
        "--rubric",
        str(rubric),
        "--prompt",
        "Update the report",
        "--answer",
        "Updated the report: 42.",
        "--before",
        str(before),
        "--after",
        str(after),
        *judge,
        "--output",
        str(tmp_path / "grade.json"),
    )


def test_a_gpt5_judge_with_the_defaults_gives_verdicts(tmp_path):
    # gpt-5 refuses any temperature but 1: the judge's default used to be 0, litellm refused
    # every call and every criterion came out "ungradeable".
    with ScriptedLLM([MET]) as llm:
        result = _grade(tmp_path, "--judge-model", "openai/gpt-5", "--api-base", llm.api_base)
        requests = list(llm.requests)
    assert result.returncode == 0, result.stderr
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert [c["verdict"] for c in grade["criteria"]] == ["met"]
    (request,) = requests
    assert "temperature" not in request and "max_tokens" not in request
    assert request["response_format"]["type"] == "json_schema"


def test_a_judge_the_provider_refuses_a_parameter_of_fails_grade_with_the_providers_words(tmp_path):
    # A model atoll knows nothing about gets temperature 0; the provider refuses it. That is the
    # configuration, not the criterion: `atoll grade` exits non-zero, naming it.
    with ScriptedLLM(lambda request: UNSUPPORTED_TEMPERATURE) as llm:
        result = _grade(tmp_path, "--judge-model", "openai/house-reasoner", "--api-base", llm.api_base)
        api_base = llm.api_base
    assert result.returncode != 0
    line = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert f"openai/house-reasoner at {api_base}" in line
    assert "Unsupported value: 'temperature' does not support 0.0 with this model" in line
    assert not (tmp_path / "grade.json").exists()


def test_a_judge_config_asking_a_refused_parameter_fails_grade_naming_it(tmp_path):
    config = tmp_path / "judge.json"
    config.write_text(json.dumps({"model": "openai/gpt-5", "temperature": 0.0}))
    result = _grade(tmp_path, "--judge-config", str(config))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()  # one line
    assert "model openai/gpt-5 does not accept temperature: 0.0" in line and "drop_params" not in line
    assert not (tmp_path / "grade.json").exists()


# --- against the provider emulators (tests/providers/): thinking on, the providers' rules held ---

VERDICT = {
    "thinking": "The report says 42.",
    "content": json.dumps({"rationale": "it says 42", "verdict": "met"}),
}


def _blocks():
    from grader.judge import Block

    return [
        Block("TASK", "Update the report"),
        Block("FINAL_ANSWER", "Updated the report: 42."),
        Block("CRITERION", "The report states 42"),
    ]


async def test_a_claude_judge_with_thinking_high_gives_verdicts():
    from grader.judge import judge
    from tests.providers.anthropic import AnthropicEmulator

    with AnthropicEmulator([VERDICT]) as emu:
        config = JudgeConfig(
            model="anthropic/claude-opus-4-5-20251101", api_base=emu.api_base, api_key="test", thinking="high"
        )
        result = await judge(config, _blocks())
        assert emu.rejections == []
        (sent,) = emu.requests
    assert result.verdict is Verdict.met, result.error
    assert (
        sent["thinking"]["type"] == "enabled"
        and 1024 <= sent["thinking"]["budget_tokens"] < sent["max_tokens"]
    )
    assert "temperature" not in sent  # the judge's temperature 0 is refused with thinking on
    assert (sent.get("tool_choice") or {}).get("type") not in ("any", "tool")  # no forced tool either


@pytest.mark.parametrize("thinking", [None, "high"])
async def test_the_papers_judge_gemini_3_flash_gives_verdicts(thinking):
    from grader.judge import judge
    from tests.providers.gemini import GeminiEmulator

    with GeminiEmulator([VERDICT]) as emu:
        config = JudgeConfig(
            model="gemini/gemini-3-flash-preview", api_base=emu.api_base, api_key="test", thinking=thinking
        )
        result = await judge(config, _blocks())
        assert emu.rejections == []
        (sent,) = emu.requests
    assert result.verdict is Verdict.met, result.error
    generation = sent.get("generationConfig") or {}
    assert "temperature" not in generation  # Google advises Gemini 3's default
    if thinking:
        assert generation["thinkingConfig"]["thinkingLevel"].lower() == "high"


@pytest.mark.parametrize(
    ("model", "thinking", "path"),
    [
        ("openai/gpt-5", None, "/v1/chat/completions"),
        ("openai/gpt-5.2", "high", "/v1/chat/completions"),
        ("openai/gpt-5.2-pro", "high", "/v1/responses"),
    ],
)
async def test_openai_reasoning_judges_give_verdicts_against_the_openai_emulator(model, thinking, path):
    # The emulator refuses what OpenAI refuses (temperature other than 1 on gpt-5 and pro models,
    # or on gpt-5.2 at an effort other than none; max_tokens; a non-strict schema).
    from grader.judge import judge
    from tests.providers.openai import OpenAIChatEmulator

    with OpenAIChatEmulator([VERDICT]) as emu:
        config = JudgeConfig(model=model, api_base=emu.api_base, api_key="test", thinking=thinking)
        result = await judge(config, _blocks())
        assert emu.rejections == []
        (sent,) = emu.requests
        assert emu.request_paths == [path]
    assert result.verdict is Verdict.met, result.error
    assert "temperature" not in sent and "max_tokens" not in sent
    if thinking:
        effort = sent.get("reasoning_effort") or (sent.get("reasoning") or {}).get("effort")
        assert effort == "high"


def test_grade_with_a_judge_openai_refuses_exits_non_zero_with_openais_words(tmp_path):
    # An o-series model neither atoll's table nor litellm knows gets the judge's temperature 0;
    # OpenAI refuses it for every criterion alike: a configuration error, not "ungradeable".
    from tests.providers.openai import OpenAIChatEmulator

    with OpenAIChatEmulator(lambda request: VERDICT) as emu:
        result = _grade(tmp_path, "--judge-model", "openai/o4-house", "--api-base", emu.api_base)
        rules = [rule for rule, _ in emu.rejections]
    assert rules == ["openai.reasoning_sampling"]
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "openai/o4-house at " in line and "configuration error" in line
    assert "Unsupported value: 'temperature' does not support 0.0 with this model" in line
    assert not (tmp_path / "grade.json").exists()


def test_grade_takes_the_judges_thinking_level(tmp_path):
    from tests.providers.anthropic import AnthropicEmulator

    with AnthropicEmulator([VERDICT]) as emu:
        result = _grade(
            tmp_path,
            "--judge-model",
            "anthropic/claude-opus-4-5-20251101",
            "--api-base",
            emu.api_base,
            "--thinking",
            "high",
        )
        assert emu.rejections == []
        (sent,) = emu.requests
    assert result.returncode == 0, result.stderr
    assert sent["thinking"]["type"] == "enabled" and "temperature" not in sent
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert [c["verdict"] for c in grade["criteria"]] == ["met"]
