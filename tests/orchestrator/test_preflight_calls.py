"""Preflight tries the exact call the run will make — the agent's tool-calling turn and the
judge's verdict, with their real parameters — so a model or judge the provider refuses fails
the run in seconds with the provider's words (in process: `atoll run`'s own check_models over
real litellm, the provider emulators of tests/providers/ and the scripted OpenAI server)."""

from __future__ import annotations

import json
import time

import pytest

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.experiment_file import experiment_from_data
from atoll.testing.scripted_llm import TEMPERATURE_UNSUPPORTED, ScriptedLLM
from atoll_cli.commands.run import check_models
from tests.orchestrator.judge_only import judge_only_experiment
from tests.providers.anthropic import AnthropicEmulator
from tests.providers.gemini import GeminiEmulator

MET = {"content": json.dumps({"rationale": "2 + 2 is 4", "verdict": "met"})}
UNSUPPORTED_TEMPERATURE = {"status": 400, "body": TEMPERATURE_UNSUPPORTED}


def _spec(agents: list[dict], judge: dict | None = None) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {"name": "e", "benchmark": "b", "agents": agents, "judge": judge or {}, "executor": "local"}
    )


async def _check(spec: ExperimentSpec) -> float:
    started = time.monotonic()
    await check_models([spec], quiet=True)
    return time.monotonic() - started


async def test_the_judge_is_tried_with_its_real_verdict_call():
    with ScriptedLLM([MET]) as llm:
        await _check(
            _spec([{"name": "o", "agent": "replay"}], {"model": "openai/gpt-5", "api_base": llm.api_base})
        )
        (sent,) = llm.requests
    # gpt-5's verdict call: the verdict schema, no temperature (it refuses 0), no 1-token cap
    assert sent["response_format"]["json_schema"]["name"] == "verdict"
    assert "temperature" not in sent and "max_tokens" not in sent
    assert "CRITERION" in sent["messages"][-1]["content"]


async def test_a_judge_whose_provider_refuses_its_temperature_fails_preflight_with_the_providers_words():
    # A model atoll knows nothing about gets the judge's temperature 0; its server refuses it.
    # A bare probe without the judge's parameters passed, and every criterion of the run then
    # came out "ungradeable".
    with ScriptedLLM(lambda request: UNSUPPORTED_TEMPERATURE if "temperature" in request else MET) as llm:
        spec = _spec(
            [{"name": "o", "agent": "replay"}], {"model": "openai/house-reasoner", "api_base": llm.api_base}
        )
        with pytest.raises(AtollError) as raised:
            await _check(spec)
        api_base = llm.api_base
    message = raised.value.message
    assert raised.value.code == "model_endpoint"
    assert f"openai/house-reasoner at {api_base} (judge)" in message
    assert "Unsupported value: 'temperature' does not support 0.0 with this model" in message
    assert "[tried a verdict" in message


@pytest.fixture(autouse=True)
def provider_keys(monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, "test")


async def test_a_claude_agent_the_provider_refuses_fails_preflight_in_seconds():
    # Anthropic's own thinking parameter given by hand (extra_args pass through verbatim) with
    # a max_tokens at or below its budget: Anthropic refuses it, so the run never starts.
    with AnthropicEmulator([{"content": "never reached"}]) as emu:
        spec = _spec(
            [
                {
                    "name": "claude",
                    "model": "anthropic/claude-opus-4-5-20251101",
                    "api_base": emu.api_base,
                    "extra_args": {
                        "thinking": {"type": "enabled", "budget_tokens": 4096},
                        "max_tokens": 2048,
                    },
                }
            ]
        )
        started = time.monotonic()
        with pytest.raises(AtollError) as raised:
            await _check(spec)
        elapsed = time.monotonic() - started
        assert [rule for rule, _ in emu.rejections] == ["anthropic.thinking_budget_below_max_tokens"]
        sent, api_base = emu.requests[0], emu.api_base
    message = raised.value.message
    assert f"anthropic/claude-opus-4-5-20251101 at {api_base} (agent claude)" in message
    assert "`max_tokens` must be greater than `thinking.budget_tokens`" in message
    assert "[tried a tool-calling turn" in message
    assert sent["tools"][0]["name"] == "filesystem_read_text_file"  # the agent's tool turn, not a bare probe
    assert elapsed < 15


def test_a_hand_written_anthropic_thinking_with_a_temperature_is_refused_when_loaded():
    with pytest.raises(AtollError, match="does not accept temperature: 0.0: not while thinking is on"):
        experiment_from_data(
            {
                "name": "e",
                "benchmark": "b",
                "executor": "local",
                "agents": [
                    {
                        "name": "claude",
                        "model": "anthropic/claude-opus-4-5-20251101",
                        "extra_args": {
                            "thinking": {"type": "enabled", "budget_tokens": 2048},
                            "temperature": 0.0,
                        },
                    }
                ],
            }
        )


async def test_a_wrong_judge_model_name_fails_preflight_with_googles_words():
    not_found = {
        "status": 404,
        "body": {
            "error": {
                "code": 404,
                "message": "models/gemini-3-flash is not found for API version v1beta, or is not supported "
                "for generateContent.",
                "status": "NOT_FOUND",
            }
        },
    }
    with GeminiEmulator(lambda request: not_found) as emu:
        spec = _spec(
            [{"name": "o", "agent": "replay"}],
            {"model": "gemini/gemini-3-flash", "api_base": emu.api_base},
        )
        with pytest.raises(AtollError) as raised:
            await _check(spec)
    message = raised.value.message
    assert "gemini/gemini-3-flash at " in message and "(judge): configuration error" in message
    assert "models/gemini-3-flash is not found for API version v1beta" in message
    assert "[tried a verdict]" in message


async def test_agents_and_judge_with_thinking_pass_preflight_against_their_providers():
    with (
        AnthropicEmulator(lambda request: {"content": "ok", "thinking": "fine"}) as claude,
        GeminiEmulator(lambda request: MET) as gemini,
    ):
        spec = _spec(
            [
                {
                    "name": "claude",
                    "model": "anthropic/claude-opus-4-5-20251101",
                    "api_base": claude.api_base,
                    "thinking": "high",
                },
                {
                    "name": "gemini",
                    "model": "gemini/gemini-3-pro-preview",
                    "api_base": gemini.api_base,
                    "thinking": "high",
                },
            ],
            {
                "model": "gemini/gemini-3-flash-preview",
                "api_base": gemini.api_base,
                "thinking": "high",
            },
        )
        await _check(spec)
        assert claude.rejections == [] and gemini.rejections == []
        assert len(claude.requests) == 1 and len(gemini.requests) == 2  # one call per distinct call


@pytest.mark.slow
def test_a_run_whose_judge_openai_refuses_stops_with_openais_words(tmp_path):
    # Without the preflight, the grading of the first trial meets the refusal: a configuration
    # error, so the run stops naming it instead of recording every criterion "ungradeable".
    import asyncio

    from orchestrator.runner import run_experiment
    from tests.providers.openai import OpenAIChatEmulator

    with OpenAIChatEmulator(lambda request: MET) as emu:
        spec = judge_only_experiment(
            tmp_path,
            "refused",
            {"model": "openai/o4-house", "api_base": emu.api_base},
            max_infra_retries=2,
            infra_retry_backoff_s=0,
        )
        with pytest.raises(AtollError) as raised:
            asyncio.run(run_experiment(spec, quiet=True))
        assert {rule for rule, _ in emu.rejections} == {"openai.reasoning_sampling"}
    assert raised.value.code == "model_endpoint"
    assert "3 of 3 attempts met a model endpoint configuration error" in raised.value.message
    assert "openai/o4-house at " in raised.value.message
    assert "Unsupported value: 'temperature' does not support 0.0 with this model" in raised.value.message
