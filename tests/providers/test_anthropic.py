"""The Anthropic Messages emulator: each documented rule refuses a request that breaks it and
accepts one that keeps it, and litellm's real Anthropic code completes a thinking tool loop."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import litellm
import pytest

from tests.providers._litellm import WEATHER_TOOLS, complete
from tests.providers._rules import assert_refused_then_kept
from tests.providers._server import post_json
from tests.providers.anthropic import AnthropicEmulator

litellm.suppress_debug_info = True

MODEL = "anthropic/claude-opus-4-5-20251101"


EMULATOR = AnthropicEmulator
SCRIPT = [{"content": "ok"}] * 4


# --- raw requests: one rule broken, then kept ------------------------------------------------


def _tool_loop(emu: AnthropicEmulator) -> dict[str, Any]:
    """A valid thinking tool loop: user, assistant (signed thinking + tool_use), tool result."""
    thought = "The user wants the weather; call the tool."
    return {
        "model": "claude-opus-4-5-20251101",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thought, "signature": emu.sign("thinking", thought)},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {"type": "text", "text": "Answer briefly."},
                ],
            },
        ],
    }


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting a dotted path (list indices as numbers); value None deletes it."""

    def apply(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = body
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        key: Any = int(last) if isinstance(target, list) else last
        if value is None:
            del target[key]
        else:
            target[key] = value

    return apply


def _tamper(body: dict[str, Any]) -> None:
    body["messages"][1]["content"][0]["thinking"] += " (edited)"


def _drop_thinking(body: dict[str, Any]) -> None:
    del body["messages"][1]["content"][0]


def _text_before_result(body: dict[str, Any]) -> None:
    body["messages"][2]["content"].reverse()


def _result_in_later_message(body: dict[str, Any]) -> None:
    body["messages"][2] = {"role": "user", "content": "Hm?"}
    body["messages"] += [
        {"role": "assistant", "content": "Waiting."},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ]


# (rule id, mutation that breaks it, mutation that keeps it)
RULES: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]] = [
    ("anthropic.max_tokens_required", _set("max_tokens", None), _set("max_tokens", 5000)),
    ("anthropic.roles", _set("messages.0.role", "system"), _set("messages.0.role", "user")),
    ("anthropic.tool_name", _set("tools.0.name", "get.weather"), _set("tools.0.name", "get-weather_2")),
    ("anthropic.tool_name", _set("tools.0.name", "x" * 65), _set("tools.0.name", "x" * 64)),
    (
        "anthropic.input_schema_object",
        _set("tools.0.input_schema", {"type": "string"}),
        _set("tools.0.input_schema", {"type": "object"}),
    ),
    ("anthropic.tool_result_follows_tool_use", _result_in_later_message, lambda body: None),
    (
        "anthropic.tool_result_follows_tool_use",
        _set("messages.2.content.0.tool_use_id", "toolu_other"),
        _set("messages.2.content.0.tool_use_id", "toolu_1"),
    ),
    ("anthropic.tool_result_first", _text_before_result, lambda body: None),
    (
        "anthropic.thinking_budget_min",
        _set("thinking.budget_tokens", 1023),
        _set("thinking.budget_tokens", 1024),
    ),
    (
        "anthropic.thinking_budget_below_max_tokens",
        _set("thinking.budget_tokens", 4096),
        _set("thinking.budget_tokens", 4095),
    ),
    ("anthropic.thinking_temperature", _set("temperature", 0.0), _set("temperature", 1)),
    ("anthropic.thinking_top_k", _set("top_k", 5), lambda body: None),
    ("anthropic.thinking_top_p", _set("top_p", 0.9), _set("top_p", 0.95)),
    (
        "anthropic.thinking_tool_choice",
        _set("tool_choice", {"type": "any"}),
        _set("tool_choice", {"type": "auto"}),
    ),
    (
        "anthropic.thinking_tool_choice",
        _set("tool_choice", {"type": "tool", "name": "get_weather"}),
        _set("tool_choice", {"type": "none"}),
    ),
    ("anthropic.thinking_block_first", _drop_thinking, _set("thinking", {"type": "disabled"})),
    ("anthropic.thinking_signature", _tamper, lambda body: None),
    ("anthropic.thinking_signature", _set("messages.1.content.0.signature", "forged"), lambda body: None),
]


@pytest.mark.parametrize(
    ("rule", "break_rule", "keep_rule"), RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)]
)
def test_rule_refuses_a_request_that_breaks_it_and_accepts_one_that_keeps_it(
    emu, rule, break_rule, keep_rule
):
    url = emu.url + "/v1/messages"
    body = assert_refused_then_kept(emu, url, rule, lambda: _tool_loop(emu), break_rule, keep_rule)
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


def test_bare_assistant_turn_without_thinking_is_refused_with_anthropic_words(emu):
    """What issue #27 saw: the agent sent back role + tool_calls only, dropping thinking."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"P"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    ]
    with pytest.raises(litellm.BadRequestError, match="must start with a thinking block"):
        litellm.completion(
            model=MODEL,
            api_base=emu.api_base,
            api_key="test",
            messages=messages,
            tools=WEATHER_TOOLS,
            reasoning_effort="high",
            max_retries=0,
        )
    assert [rule for rule, _ in emu.rejections] == ["anthropic.thinking_block_first"]


# --- litellm's real provider code against the emulator ----------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("thinking", [{"reasoning_effort": "high"}, {}], ids=["thinking", "no-thinking"])
def test_litellm_completes_a_tool_loop_when_the_message_is_sent_back_as_returned(emu, stream, thinking):
    emu.load(
        [
            {
                "thinking": "Call the weather tool.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
            {
                "thinking": "It said sunny.",
                "content": "Sunny in Paris.",
                "usage": {"cache_read_input_tokens": 40},
            },
        ]
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = complete(emu, MODEL, messages, stream, **thinking).choices[0].message
    assert first.tool_calls[0].function.name == "get_weather"
    if thinking:
        assert first.thinking_blocks[0]["thinking"] == "Call the weather tool."
        assert first.reasoning_content == "Call the weather tool."
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
    second = complete(emu, MODEL, messages, stream, **thinking)

    assert second.choices[0].message.content == "Sunny in Paris."
    assert emu.rejections == []
    replayed = emu.requests[1]["messages"][1]["content"]
    if thinking:
        assert emu.requests[0]["thinking"]["type"] == "enabled"
        assert replayed[0]["type"] == "thinking" and replayed[0]["thinking"] == "Call the weather tool."
    else:
        assert "thinking" not in emu.requests[0]
        assert [block["type"] for block in replayed] == ["tool_use"]
    assert second.usage.prompt_tokens_details.cached_tokens == 40


def test_litellm_sees_a_tampered_thinking_block_refused(emu):
    emu.load([{"thinking": "Plan.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}])
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = complete(emu, MODEL, messages, False, reasoning_effort="high").choices[0].message
    tampered = copy.deepcopy(first.model_dump())
    tampered["thinking_blocks"][0]["thinking"] = "A different plan."
    messages += [tampered, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "cold"}]
    with pytest.raises(litellm.BadRequestError, match="Invalid `signature`"):
        complete(emu, MODEL, messages, False, reasoning_effort="high")
    assert [rule for rule, _ in emu.rejections] == ["anthropic.thinking_signature"]


def test_streamed_answer_uses_anthropic_event_sequence(emu):
    emu.load([{"thinking": "Think first.", "content": "Done."}])
    body = {
        "model": "claude-opus-4-5-20251101",
        "max_tokens": 2048,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "Go."}],
    }
    text = httpx.post(emu.url + "/v1/messages", json=body, timeout=10).text
    events = [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]
    assert events[:3] == ["message_start", "ping", "content_block_start"]
    assert "signature_delta" in text and "thinking_delta" in text and "text_delta" in text
    assert events[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_litellm_replays_redacted_thinking_unchanged(emu, stream):
    emu.load(
        [
            {
                "thinking": "Plan.",
                "redacted_thinking": True,
                "tool_calls": [{"name": "get_weather", "arguments": {}}],
            },
            {"content": "Done."},
        ]
    )
    messages: list[Any] = [{"role": "user", "content": "Weather?"}]
    first = complete(emu, MODEL, messages, stream, reasoning_effort="high").choices[0].message
    assert [block["type"] for block in first.thinking_blocks] == ["thinking", "redacted_thinking"]
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
    complete(emu, MODEL, messages, stream, reasoning_effort="high")
    assert emu.rejections == []
    replayed = emu.requests[1]["messages"][1]["content"]
    assert [block["type"] for block in replayed] == ["thinking", "redacted_thinking", "tool_use"]
    forged = copy.deepcopy(emu.requests[1])
    forged["messages"][1]["content"][1]["data"] = "0.forged"
    assert post_json(emu.url + "/v1/messages", forged)[0] == 400
    assert [rule for rule, _ in emu.rejections] == ["anthropic.thinking_signature"]
