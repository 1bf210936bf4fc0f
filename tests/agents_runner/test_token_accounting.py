"""Token accounting as providers bill it: reasoning and cached tokens per call and in the run's
totals, from each provider's native usage (through litellm's real provider code against the
emulators), priced by litellm's price map or by the configured per-token prices."""

from __future__ import annotations

import litellm
import pytest

from agents_runner import run_agent
from agents_runner.config import AgentConfig
from agents_runner.model import ModelClient
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus, Usage
from tests.providers.openai import OpenAIEmulator

from .conftest import call

MESSAGES = [{"role": "user", "content": "Say hello."}]


def _price(model: str, key: str) -> float:
    return float(litellm.model_cost[model][key])


async def _one_call(model: str, api_base: str, stream: bool, **config) -> Usage:
    client = ModelClient(model, AgentConfig(stream=stream, **config), api_base=api_base, api_key="test")
    await client.complete(MESSAGES, None, step=1)
    assert len(client.calls) == 1 and client.calls[0].usage == client.usage
    return client.usage


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_cache_reads_writes_and_thinking_are_counted_and_priced(anthropic, stream):
    anthropic.reset()
    anthropic.load(
        [
            {
                "thinking": "A short greeting will do.",
                "content": "Hello.",
                "usage": {
                    "input_tokens": 1000,
                    "output_tokens": 200,
                    "cache_read_input_tokens": 3000,
                    "cache_creation_input_tokens": 500,
                },
            }
        ]
    )
    usage = await _one_call(
        "anthropic/claude-opus-4-5-20251101", anthropic.api_base, stream, reasoning_effort="high"
    )
    assert anthropic.rejections == []
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (4500, 3000, 500)
    assert usage.completion_tokens == 200 and 0 < usage.reasoning_tokens < 200
    model = "claude-opus-4-5-20251101"
    expected = (
        1000 * _price(model, "input_cost_per_token")
        + 3000 * _price(model, "cache_read_input_token_cost")
        + 500 * _price(model, "cache_creation_input_token_cost")
        + 200 * _price(model, "output_cost_per_token")
    )
    assert usage.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_thoughts_and_cached_content_are_counted_and_priced(gemini, stream):
    gemini.reset()
    gemini.load(
        [
            {
                "thinking": "Greet.",
                "content": "Hello.",
                "usage": {
                    "promptTokenCount": 2000,
                    "cachedContentTokenCount": 1500,
                    "candidatesTokenCount": 100,
                    "thoughtsTokenCount": 400,
                },
            }
        ]
    )
    usage = await _one_call("gemini/gemini-3-flash-preview", gemini.api_base, stream, reasoning_effort="high")
    assert gemini.rejections == []
    assert (usage.prompt_tokens, usage.cached_tokens) == (2000, 1500)
    assert (usage.completion_tokens, usage.reasoning_tokens) == (500, 400)
    model = "gemini/gemini-3-flash-preview"
    expected = (
        500 * _price(model, "input_cost_per_token")
        + 1500 * _price(model, "cache_read_input_token_cost")
        + 100 * _price(model, "output_cost_per_token")
        + 400 * _price(model, "output_cost_per_reasoning_token")
    )
    assert usage.cost_usd == pytest.approx(expected)


OPENAI_USAGE = {
    "prompt_tokens": 4000,
    "completion_tokens": 900,
    "prompt_tokens_details": {"cached_tokens": 3072},
    "completion_tokens_details": {"reasoning_tokens": 640},
}


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_reasoning_and_cached_tokens_are_counted_and_priced(stream):
    with ScriptedLLM([{"content": "Hello.", "usage": OPENAI_USAGE}]) as llm:
        usage = await _one_call("openai/gpt-5", llm.api_base, stream)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (4000, 3072, 0)
    assert (usage.completion_tokens, usage.reasoning_tokens) == (900, 640)
    expected = (
        928 * _price("gpt-5", "input_cost_per_token")
        + 3072 * _price("gpt-5", "cache_read_input_token_cost")
        + 900 * _price("gpt-5", "output_cost_per_token")
    )
    assert usage.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_api_reasoning_and_cached_tokens_are_counted_and_priced(stream):
    usage = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 700,
        "output_tokens_details": {"reasoning_tokens": 600},
    }
    with OpenAIEmulator([{"thinking": "Greet.", "content": "Hello.", "usage": usage}]) as emu:
        recorded = await _one_call("openai/gpt-5.2-pro", emu.api_base, stream, reasoning_effort="high")
        assert emu.rejections == [] and emu.request_paths == ["/v1/responses"]
    assert (recorded.prompt_tokens, recorded.cached_tokens) == (5000, 4096)
    assert (recorded.completion_tokens, recorded.reasoning_tokens) == (700, 600)
    # litellm has no cache-read price for gpt-5.2-pro: every input token at the input price
    expected = 5000 * _price("gpt-5.2-pro", "input_cost_per_token") + 700 * _price(
        "gpt-5.2-pro", "output_cost_per_token"
    )
    assert recorded.cost_usd == pytest.approx(expected)


async def test_configured_prices_charge_cache_reads_at_their_own_price(anthropic):
    anthropic.reset()
    anthropic.load(
        [
            {
                "content": "Hello.",
                "usage": {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 1000},
            }
        ]
        * 2
    )
    prices = {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-5}
    usage = await _one_call("anthropic/claude-opus-4-5-20251101", anthropic.api_base, False, **prices)
    assert usage.cost_usd == pytest.approx(1100 * 1e-6 + 10 * 1e-5)  # no cache price: the input price
    usage = await _one_call(
        "anthropic/claude-opus-4-5-20251101",
        anthropic.api_base,
        False,
        cache_read_cost_per_token=1e-7,
        **prices,
    )
    assert usage.cost_usd == pytest.approx(100 * 1e-6 + 1000 * 1e-7 + 10 * 1e-5)


async def test_a_runs_totals_add_up_its_calls(anthropic, gateway):
    usage = {
        "input_tokens": 50,
        "output_tokens": 20,
        "cache_read_input_tokens": 400,
        "cache_creation_input_tokens": 30,
    }
    anthropic.reset()
    anthropic.load(
        [
            {"thinking": "Look.", "tool_calls": [call("toolbelt_list_tools")], "usage": usage},
            {"thinking": "Done.", "tool_calls": [call("final_answer", answer="ok")], "usage": usage},
        ]
    )
    trajectory = await run_agent(
        model="anthropic/claude-opus-4-5-20251101",
        api_base=anthropic.api_base,
        api_key="test",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt="List the tools, then answer ok.",
        config={"reasoning_effort": "high"},
    )
    assert trajectory.status == RunStatus.completed, trajectory.error
    calls = [c.usage for c in trajectory.model_calls]
    assert len(calls) == 2 and all(c.cached_tokens == 400 and c.cache_write_tokens == 30 for c in calls)
    assert all(c.reasoning_tokens > 0 for c in calls)
    total = sum(calls, Usage())
    assert trajectory.usage == total
    assert (total.cached_tokens, total.cache_write_tokens) == (800, 60)
