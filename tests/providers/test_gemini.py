"""The Gemini generateContent emulator: each documented rule refuses a request that breaks it and
accepts one that keeps it, and litellm's real Gemini code completes a tool loop in both of its
thought-signature modes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import litellm
import pytest

from tests.providers._litellm import complete, rebuilt_without_provider_fields
from tests.providers._rules import assert_refused_then_kept
from tests.providers._server import post_json
from tests.providers.gemini import PLACEHOLDER_SIGNATURES, GeminiEmulator

litellm.suppress_debug_info = True

GEMINI_3 = "gemini/gemini-3-pro-preview"


EMULATOR = GeminiEmulator
SCRIPT = [{"content": "ok"}] * 4


def _url(emu: GeminiEmulator, model: str = "gemini-3-pro-preview") -> str:
    return f"{emu.api_base}/models/{model}:generateContent"


def _call(emu: GeminiEmulator, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A functionCall part signed as the emulator signs the ones it returns."""
    call = {"name": name, "args": args}
    return {
        "functionCall": call,
        "thoughtSignature": emu.sign("thought", json.dumps([name, args], sort_keys=True)),
    }


def _tool_loop(emu: GeminiEmulator) -> dict[str, Any]:
    """A valid Gemini 3 step: user, model (signed functionCall), user (functionResponse)."""
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
            {"role": "model", "parts": [_call(emu, "get_weather", {"city": "Paris"})]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "get_weather", "response": {"content": "sunny"}}}],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
                    }
                ]
            }
        ],
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}},
    }


def _edit(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def apply(body: dict[str, Any]) -> None:
        change(body)

    return apply


def _params(body: dict[str, Any]) -> dict[str, Any]:
    return body["tools"][0]["functionDeclarations"][0]["parameters"]


def _city(body: dict[str, Any]) -> dict[str, Any]:
    return _params(body)["properties"]["city"]


def _second_call(body: dict[str, Any], emu_call: dict[str, Any] | None) -> None:
    body["contents"][2]["parts"].append(
        {"functionResponse": {"name": "get_weather", "response": {"content": "rain"}}}
    )
    if emu_call is not None:
        body["contents"][1]["parts"].append(emu_call)


def _keep(body: dict[str, Any]) -> None:
    pass


# (rule id, mutation that breaks it, mutation that keeps it)
RULES: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]] = [
    ("gemini.roles", _edit(lambda b: b["contents"][0].update(role="system")), _keep),
    (
        "gemini.function_response_follows_call",
        _edit(lambda b: b["contents"][1].update(parts=[{"text": "Let me check."}])),
        _keep,
    ),
    (
        "gemini.function_response_count",
        _edit(lambda b: _second_call(b, None)),
        # Parallel calls: only the first functionCall part carries the signature.
        _edit(lambda b: _second_call(b, {"functionCall": {"name": "get_weather", "args": {"city": "Lyon"}}})),
    ),
    (
        "gemini.thought_signature_missing",
        _edit(lambda b: b["contents"][1]["parts"][0].pop("thoughtSignature")),
        _keep,
    ),
    (
        "gemini.thought_signature_invalid",
        _edit(lambda b: b["contents"][1]["parts"][0]["functionCall"]["args"].update(city="Rome")),
        _keep,
    ),
    (
        "gemini.thought_signature_invalid",
        _edit(lambda b: b["contents"][1]["parts"][0].update(thoughtSignature="Zm9yZ2Vk")),
        _edit(
            lambda b: b["contents"][1]["parts"][0].update(thoughtSignature=sorted(PLACEHOLDER_SIGNATURES)[0])
        ),
    ),
    ("gemini.schema", _edit(lambda b: _params(b).update(additionalProperties=False)), _keep),
    ("gemini.schema", _edit(lambda b: _city(b).update({"$ref": "#/$defs/City"})), _keep),
    (
        "gemini.schema",
        _edit(lambda b: _city(b).update(type=["STRING", "NULL"])),
        _edit(lambda b: _city(b).update(nullable=True)),
    ),
    (
        "gemini.schema",
        _edit(lambda b: _city(b).update(type="INTEGER", enum=[1, 2])),
        _edit(lambda b: _city(b).update(enum=["Paris"])),
    ),
    (
        "gemini.schema",
        _edit(lambda b: _city(b).update(type="OBJECT")),
        _edit(lambda b: _city(b).update(type="OBJECT", properties={"name": {"type": "STRING"}})),
    ),
    (
        "gemini.thinking_config",
        _edit(lambda b: b["generationConfig"]["thinkingConfig"].update(thinkingBudget=1024)),
        _edit(lambda b: b["generationConfig"].update(thinkingConfig={"thinkingBudget": 1024})),
    ),
    (
        "gemini.thinking_config",
        _edit(lambda b: b["generationConfig"]["thinkingConfig"].update(thinkingLevel="medium")),
        _edit(lambda b: b["generationConfig"]["thinkingConfig"].update(thinkingLevel="low")),
    ),
]


@pytest.mark.parametrize(
    ("rule", "break_rule", "keep_rule"), RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)]
)
def test_rule_refuses_a_request_that_breaks_it_and_accepts_one_that_keeps_it(
    emu, rule, break_rule, keep_rule
):
    body = assert_refused_then_kept(emu, _url(emu), rule, lambda: _tool_loop(emu), break_rule, keep_rule)
    assert body["error"]["status"] == "INVALID_ARGUMENT" and body["error"]["code"] == 400


def test_only_the_current_turn_needs_signatures_and_only_on_gemini_3(emu):
    body = _tool_loop(emu)
    unsigned = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    body["contents"][1]["parts"] = [unsigned]
    # An earlier turn (closed by a user text) is not validated.
    body["contents"] += [
        {"role": "model", "parts": [{"text": "Sunny."}]},
        {"role": "user", "parts": [{"text": "And Oslo?"}]},
        {"role": "model", "parts": [_call(emu, "get_weather", {"city": "Oslo"})]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"content": "snow"}}}],
        },
    ]
    assert post_json(_url(emu), body)[0] == 200
    current_unsigned = _tool_loop(emu)
    current_unsigned["contents"][1]["parts"] = [unsigned]
    current_unsigned["generationConfig"] = {}
    assert post_json(_url(emu, "gemini-2.5-flash"), current_unsigned)[0] == 200
    assert emu.rejections == []


def test_placeholder_signature_is_accepted_but_recorded(emu):
    body = _tool_loop(emu)
    body["contents"][1]["parts"][0]["thoughtSignature"] = "skip_thought_signature_validator"
    assert post_json(_url(emu), body)[0] == 200
    assert emu.placeholder_signatures == [(0, "get_weather")]


def test_a_placeholder_in_an_earlier_turn_is_recorded_too(emu):
    # Nothing before the current turn is validated, but a placeholder there still replaces a
    # signature the caller lost (a tool loop whose user turns carry text, e.g. a step notice).
    body = _tool_loop(emu)
    body["contents"][1]["parts"][0]["thoughtSignature"] = "skip_thought_signature_validator"
    body["contents"] += [
        {"role": "model", "parts": [{"text": "Sunny."}]},
        {"role": "user", "parts": [{"text": "And Oslo?"}]},
    ]
    assert post_json(_url(emu), body)[0] == 200
    assert emu.rejections == [] and emu.placeholder_signatures == [(0, "get_weather")]


# --- litellm's real provider code against the emulator ----------------------------------------


SCRIPT = [
    {
        "thinking": "Call the weather tool.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    },
    {"content": "Sunny in Paris.", "usage": {"cachedContentTokenCount": 7}},
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("in_id", [True, False], ids=["signature-in-id", "provider-specific-fields"])
def test_litellm_completes_a_gemini_3_tool_loop_in_both_signature_modes(emu, stream, in_id):
    emu.load(SCRIPT)
    params = {"reasoning_effort": "high", "thought_signature_in_tool_call_id": in_id}
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = complete(emu, GEMINI_3, messages, stream, **params).choices[0].message
    call = first.tool_calls[0]
    assert call.function.name == "get_weather"
    assert ("__thought__" in call.id) is in_id
    assert first.reasoning_content == "Call the weather tool."
    messages += [first, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = complete(emu, GEMINI_3, messages, stream, **params)

    assert second.choices[0].message.content == "Sunny in Paris."
    assert emu.rejections == [] and emu.placeholder_signatures == []
    assert emu.requests[0]["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "high"
    assert second.usage.prompt_tokens_details.cached_tokens == 7
    assert second.usage.completion_tokens_details.reasoning_tokens > 0


def test_litellm_without_thinking_on_gemini_2_5(emu):
    emu.load(SCRIPT)
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = complete(emu, "gemini/gemini-2.5-flash", messages, False).choices[0].message
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
    assert (
        complete(emu, "gemini/gemini-2.5-flash", messages, False).choices[0].message.content
        == "Sunny in Paris."
    )
    assert "thoughtSignature" not in json.dumps(emu.requests)
    assert emu.rejections == []


def test_a_dropped_signature_makes_litellm_send_the_placeholder_which_is_recorded(emu):
    """What issue #27 saw: with the signature outside the id, a message rebuilt as role +
    tool_calls loses it and litellm substitutes Google's skip-validation placeholder."""
    emu.load(SCRIPT)
    params = {"reasoning_effort": "high", "thought_signature_in_tool_call_id": False}
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    call = complete(emu, GEMINI_3, messages, False, **params).choices[0].message.tool_calls[0]
    rebuilt = rebuilt_without_provider_fields(call)
    messages += [rebuilt, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    complete(emu, GEMINI_3, messages, False, **params)
    assert emu.placeholder_signatures == [(1, "get_weather")]


def test_streamed_answer_is_sse_of_generate_content_responses(emu):
    emu.load([{"thinking": "Hm.", "content": "Done."}])
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Go."}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
    }
    url = f"{emu.api_base}/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
    text = httpx.post(url, json=body, timeout=10).text
    chunks = [
        json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")
    ]
    parts = [chunk["candidates"][0]["content"]["parts"][0] for chunk in chunks]
    assert parts[0] == {"text": "Hm.", "thought": True}
    assert parts[-1]["text"] == "Done." and parts[-1]["thoughtSignature"]
    assert (
        chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        and chunks[-1]["usageMetadata"]["thoughtsTokenCount"]
    )
