"""An agent's `thinking` level reaches each provider as that provider requires it (litellm's real
provider code against the emulators in tests/providers/, which refuse a request that breaks
the provider's documented rules): Anthropic's budget below max_tokens with no temperature,
Gemini 3's thinking level, OpenAI's reasoning effort."""

from __future__ import annotations

import pytest

from agents_runner.model import ModelClient, ModelProviderError
from atoll.agent_config import AgentConfig
from atoll.llm import ModelErrorKind

TOOL = {
    "type": "function",
    "function": {
        "name": "filesystem_read_text_file",
        "description": "Read a text file.",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
}
MESSAGES = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Read /notes/todo.txt."},
]
READ = {
    "thinking": "I should read the file.",
    "tool_calls": [{"name": "filesystem_read_text_file", "arguments": {"file_path": "/notes/todo.txt"}}],
}


def _client(model: str, emu, **config) -> ModelClient:
    return ModelClient(model, AgentConfig(**config), api_base=emu.api_base, api_key="test")


@pytest.mark.parametrize("stream", [False, True])
async def test_claude_thinking_high_is_a_budget_below_max_tokens_and_no_temperature(anthropic, stream):
    anthropic.reset()
    anthropic.load([READ])
    client = _client("anthropic/claude-opus-4-5-20251101", anthropic, thinking="high", stream=stream)
    reply = await client.complete(MESSAGES, [TOOL], step=1)
    assert anthropic.rejections == []
    assert [call["function"]["name"] for call in reply.tool_calls] == ["filesystem_read_text_file"]
    (sent,) = anthropic.requests
    assert sent["thinking"]["type"] == "enabled"
    assert 1024 <= sent["thinking"]["budget_tokens"] < sent["max_tokens"]
    assert sent.get("temperature", 1) == 1
    assert reply.reasoning == "I should read the file."  # the thinking came back: thinking was on


async def test_claude_thinking_with_a_temperature_is_refused_before_anything_is_sent(anthropic):
    anthropic.reset()
    anthropic.load([READ])
    client = _client("anthropic/claude-opus-4-5-20251101", anthropic, thinking="high", temperature=0.0)
    with pytest.raises(ModelProviderError) as raised:
        await client.complete(MESSAGES, [TOOL], step=1)
    assert raised.value.kind is ModelErrorKind.configuration
    assert "does not accept temperature: 0.0" in raised.value.message
    assert anthropic.requests == []


@pytest.mark.parametrize(
    ("model", "thinking", "level"),
    [
        ("gemini/gemini-3-pro-preview", "high", "high"),
        ("gemini/gemini-3-pro-preview", "low", "low"),
        ("gemini/gemini-3-flash-preview", "medium", "medium"),
        ("gemini/gemini-3-flash-preview", "off", "minimal"),
    ],
)
async def test_gemini_3_thinking_is_its_thinking_level(gemini, model, thinking, level):
    gemini.reset()
    gemini.load([READ])
    reply = await _client(model, gemini, thinking=thinking).complete(MESSAGES, [TOOL], step=1)
    assert gemini.rejections == []
    assert reply.tool_calls
    (sent,) = gemini.requests
    assert sent["generationConfig"]["thinkingConfig"]["thinkingLevel"].lower() == level
