"""The OpenAI emulator (Chat Completions and Responses): each documented rule refuses a request
that breaks it and accepts one that keeps it, and litellm's real OpenAI code completes tool loops
on both endpoints, reasoning items replayed."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import litellm
import pytest

from tests.providers._litellm import WEATHER_TOOLS, complete, rebuilt_without_provider_fields
from tests.providers._rules import assert_refused_then_kept
from tests.providers._server import post_json
from tests.providers.openai import OpenAIEmulator

litellm.suppress_debug_info = True

PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


def _script(body: dict[str, Any]) -> dict[str, Any]:
    """A tool call for a fresh question, an answer once a tool result came back."""
    fresh = body.get("input") == "Weather?" or body.get("messages", [{}])[-1].get("role") == "user"
    return {"thinking": "Call the tool.", "tool_calls": [CALL]} if fresh else {"content": "ok"}


EMULATOR = OpenAIEmulator
SCRIPT = _script


# --- Chat Completions: raw requests, one rule broken, then kept --------------------------------


def _chat(emu: OpenAIEmulator) -> dict[str, Any]:
    return {
        "model": "gpt-5.2",
        "tools": copy.deepcopy(WEATHER_TOOLS),
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    }


def _many_tools(count: int) -> Callable[[dict[str, Any]], None]:
    def apply(body: dict[str, Any]) -> None:
        body["tools"] = [
            {"type": "function", "function": {"name": f"tool_{n}", "parameters": PARAMETERS}}
            for n in range(count)
        ]

    return apply


def _call_id(length: int) -> Callable[[dict[str, Any]], None]:
    def apply(body: dict[str, Any]) -> None:
        body["messages"][1]["tool_calls"][0]["id"] = body["messages"][2]["tool_call_id"] = "c" * length

    return apply


def _strict(schema: dict[str, Any], where: str) -> Callable[[dict[str, Any]], None]:
    def apply(body: dict[str, Any]) -> None:
        if where == "response_format":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "v", "strict": True, "schema": schema},
            }
        else:
            body["tools"][0]["function"].update(strict=True, parameters=schema)

    return apply


def _update(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda body: body.update(fields)


def _keep(body: dict[str, Any]) -> None:
    pass


LOOSE = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
STRICT = {**LOOSE, "additionalProperties": False}
PARTIAL = {**STRICT, "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}
NESTED = {
    **STRICT,
    "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}}}},
    "required": ["where"],
}
NESTED_KEPT = {**NESTED, "properties": {"where": {**STRICT}}}

CHAT_RULES: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]] = [
    ("openai.tools_max", _many_tools(129), _many_tools(128)),
    (
        "openai.tool_name",
        lambda b: b["tools"][0]["function"].update(name="get.weather"),
        lambda b: b["tools"][0]["function"].update(name="get-weather"),
    ),
    (
        "openai.tool_name",
        lambda b: b["tools"][0]["function"].update(name="x" * 65),
        lambda b: b["tools"][0]["function"].update(name="x" * 64),
    ),
    ("openai.tool_call_id_length", _call_id(41), _call_id(40)),
    ("openai.tool_calls_answered", lambda b: b["messages"].pop(), _keep),
    (
        "openai.tool_calls_answered",
        lambda b: b["messages"].insert(2, {"role": "user", "content": "And?"}),
        _keep,
    ),
    ("openai.tool_message_without_call", lambda b: b["messages"][2].update(tool_call_id="call_9"), _keep),
    ("openai.reasoning_max_tokens", _update(max_tokens=100), _update(max_completion_tokens=100)),
    (
        "openai.reasoning_sampling",
        _update(model="gpt-5", temperature=0.0),
        _update(model="gpt-5", temperature=1),
    ),
    (
        "openai.reasoning_sampling",
        _update(reasoning_effort="high", temperature=0.2),
        _update(reasoning_effort="none", temperature=0.2),
    ),
    (
        "openai.reasoning_sampling",
        _update(model="gpt-5.2-pro", top_p=0.5),
        _update(model="gpt-4.1", top_p=0.5),
    ),
    (
        "openai.reasoning_effort",
        _update(model="gpt-5", reasoning_effort="none"),
        _update(model="gpt-5", reasoning_effort="minimal"),
    ),
    ("openai.strict_schema", _strict(LOOSE, "response_format"), _strict(STRICT, "response_format")),
    (
        "openai.strict_schema",
        _strict(PARTIAL, "response_format"),
        _strict({**PARTIAL, "required": ["city", "unit"]}, "response_format"),
    ),
    ("openai.strict_schema", _strict(NESTED, "tools"), _strict(NESTED_KEPT, "tools")),
]


@pytest.mark.parametrize(
    ("rule", "break_rule", "keep_rule"), CHAT_RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(CHAT_RULES)]
)
def test_chat_rule_refuses_a_request_that_breaks_it_and_accepts_one_that_keeps_it(
    emu, rule, break_rule, keep_rule
):
    url = emu.api_base + "/chat/completions"
    body = assert_refused_then_kept(emu, url, rule, lambda: _chat(emu), break_rule, keep_rule)
    assert body["error"]["type"] == "invalid_request_error" and "param" in body["error"]


# --- Responses: raw requests replaying what the emulator returned ------------------------------


def _first_turn(emu: OpenAIEmulator, **extra: Any) -> list[dict[str, Any]]:
    """Ask for a tool call; return the output items (a reasoning item, then the function call)."""
    return _first_response(emu, **extra)["output"]


def _first_response(emu: OpenAIEmulator, **extra: Any) -> dict[str, Any]:
    """The response object asking for a tool call."""
    request = {
        "model": "gpt-5.2-pro",
        "input": "Weather?",
        "tools": [{"type": "function", "name": "get_weather", "parameters": PARAMETERS}],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "high", "summary": "auto"},
        **extra,
    }
    status, body = post_json(emu.api_base + "/responses", request)
    assert status == 200, body
    return body


def _second_turn(output: list[dict[str, Any]]) -> dict[str, Any]:
    call = output[1]
    return {
        "model": "gpt-5.2-pro",
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "input": [
            {"role": "user", "content": "Weather?"},
            *copy.deepcopy(output),
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
        ],
    }


def _input(change: Callable[[list[dict[str, Any]]], Any]) -> Callable[[dict[str, Any]], None]:
    return lambda body: change(body["input"])


RESPONSES_RULES: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]] = [
    (
        "openai.responses.reasoning_item_required",
        _input(lambda items: items.pop(1)),
        _input(lambda items: items[2].pop("id")),
    ),
    (
        "openai.responses.reasoning_unchanged",
        _input(lambda items: items[1].update(encrypted_content="gAAAAforged")),
        _keep,
    ),
    (
        "openai.responses.reasoning_unchanged",
        _input(lambda items: items[1]["summary"][0].update(text="Edited.")),
        _keep,
    ),
    (
        "openai.responses.reasoning_unchanged",
        _input(lambda items: items[1].pop("encrypted_content")),
        _update(store=True),
    ),
    ("openai.responses.function_call_output", _input(lambda items: items.pop()), _keep),
    (
        "openai.responses.function_call_output",
        _input(lambda items: items[3].update(call_id="call_other")),
        _keep,
    ),
    (
        "openai.reasoning_sampling",
        _update(temperature=0.5),
        _update(model="gpt-5.2", reasoning={"effort": "none"}, temperature=0.5),
    ),
]


@pytest.mark.parametrize(
    ("rule", "break_rule", "keep_rule"),
    RESPONSES_RULES,
    ids=[f"{r[0]}-{i}" for i, r in enumerate(RESPONSES_RULES)],
)
def test_responses_rule_refuses_a_request_that_breaks_it_and_accepts_one_that_keeps_it(
    emu, rule, break_rule, keep_rule
):
    output = _first_turn(emu, store=True)
    assert [item["type"] for item in output] == ["reasoning", "function_call"]
    assert output[0]["id"].startswith("rs_") and output[1]["id"].startswith("fc_")

    assert_refused_then_kept(
        emu, emu.api_base + "/responses", rule, lambda: _second_turn(output), break_rule, keep_rule
    )


def test_responses_stream_uses_openai_event_sequence(emu):
    request = {"model": "gpt-5.2-pro", "input": "Weather?", "stream": True, "reasoning": {"summary": "auto"}}
    text = httpx.post(emu.api_base + "/responses", json=request, timeout=10).text
    events = [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]
    assert events[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert (
        "response.reasoning_summary_text.delta" in events
        and "response.function_call_arguments.done" in events
    )
    assert events[-1] == "response.completed"


# --- litellm's real provider code against the emulator ----------------------------------------


def _loop(emu: OpenAIEmulator, model: str, stream: bool, **params: Any) -> tuple[Any, Any]:
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = complete(emu, model, messages, stream, **params).choices[0].message
    assert first.tool_calls[0].function.name == "get_weather"
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
    return first, complete(emu, model, messages, stream, **params)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("model", "params"),
    [("openai/gpt-5.2", {"reasoning_effort": "high"}), ("openai/gpt-4.1", {})],
    ids=["reasoning", "no-reasoning"],
)
def test_litellm_completes_a_chat_tool_loop(emu, stream, model, params):
    emu.load(
        [
            {"thinking": "Plan.", "tool_calls": [CALL]},
            {"content": "Sunny.", "usage": {"prompt_tokens_details": {"cached_tokens": 9}}},
        ]
    )
    _, second = _loop(emu, model, stream, **params)
    assert second.choices[0].message.content == "Sunny."
    assert emu.request_paths == ["/v1/chat/completions"] * 2 and emu.rejections == []
    assert second.usage.prompt_tokens_details.cached_tokens == 9
    assert (second.usage.completion_tokens_details.reasoning_tokens or 0) > 0 if params else True


RESPONSES_CALLS = [
    ("openai/gpt-5.2-pro", {"reasoning_effort": "high"}),
    (
        "openai/responses/gpt-5.2",
        {"reasoning_effort": "high", "store": False, "include": ["reasoning.encrypted_content"]},
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("model", "params"), RESPONSES_CALLS, ids=["gpt-5.2-pro", "responses-stateless"])
def test_litellm_completes_a_responses_tool_loop_with_reasoning_items_replayed(emu, stream, model, params):
    emu.load(
        [
            {"thinking": "Plan.", "tool_calls": [CALL]},
            {"content": "Sunny.", "usage": {"input_tokens_details": {"cached_tokens": 9}}},
        ]
    )
    first, second = _loop(emu, model, stream, **params)
    assert first.reasoning_items[0]["id"].startswith("rs_")
    assert second.choices[0].message.content == "Sunny."
    assert emu.request_paths == ["/v1/responses"] * 2
    assert emu.rejections == [] and emu.dropped_reasoning == []
    replayed = [item for item in emu.requests[1]["input"] if item.get("type") == "reasoning"]
    assert [item["id"] for item in replayed] == [first.reasoning_items[0]["id"]]
    assert second.usage.prompt_tokens_details.cached_tokens == 9
    assert second.usage.completion_tokens_details.reasoning_tokens > 0


def test_a_message_rebuilt_without_reasoning_items_is_recorded_as_a_cold_turn(emu):
    """What issue #27 saw: gpt-5.2-pro never got its reasoning items back."""
    emu.load([{"tool_calls": [CALL]}, {"content": "Sunny."}])
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = complete(emu, "openai/gpt-5.2-pro", messages, False).choices[0].message
    call = first.tool_calls[0]
    rebuilt = rebuilt_without_provider_fields(call)
    messages += [rebuilt, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    complete(emu, "openai/gpt-5.2-pro", messages, False)
    assert emu.dropped_reasoning == [(1, call.id)]


def test_litellm_sees_tampered_encrypted_reasoning_refused(emu):
    emu.load([{"tool_calls": [CALL]}])
    params = {"store": False, "include": ["reasoning.encrypted_content"]}
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = (
        complete(emu, "openai/responses/gpt-5.2", messages, False, reasoning_effort="high", **params)
        .choices[0]
        .message
    )
    tampered = json.loads(first.model_dump_json())
    tampered["reasoning_items"][0]["encrypted_content"] = "gAAAAforged"
    messages += [tampered, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
    with pytest.raises(litellm.BadRequestError, match="could not be verified"):
        complete(emu, "openai/responses/gpt-5.2", messages, False, reasoning_effort="high", **params)
    assert [rule for rule, _ in emu.rejections] == ["openai.responses.reasoning_unchanged"]


def test_previous_response_id_brings_the_stored_calls_into_context(emu):
    response = _first_response(emu, store=True)
    output, response_id = response["output"], response["id"]
    answer = {"type": "function_call_output", "call_id": output[1]["call_id"], "output": "sunny"}
    alone = {"model": "gpt-5.2-pro", "input": [answer]}
    assert post_json(emu.api_base + "/responses", alone)[0] == 400
    assert [rule for rule, _ in emu.rejections] == ["openai.responses.function_call_output"]
    assert post_json(emu.api_base + "/responses", {**alone, "previous_response_id": response_id})[0] == 200
