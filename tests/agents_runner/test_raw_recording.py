"""record_raw: each model call's request as sent to litellm and its raw response, kept apart
from the trajectory, bounded per run, and never holding a key. Through litellm's real OpenAI
provider against the scripted server."""

from __future__ import annotations

import json

from agents_runner import run_agent
from atoll.jsonio import model_json
from atoll.testing.scripted_llm import ScriptedLLM

from .conftest import call

KEY = "sk-raw-recording-0123456789abcdef"
ENV_KEY = "sk-env-provider-key-fedcba9876543210"


async def test_each_call_is_recorded_as_sent_and_as_answered_without_the_key(gateway, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    script = [
        {
            "tool_calls": [call("toolbelt_list_tools")],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20},
        },
        {"content": "wrapping up", "tool_calls": [call("final_answer", answer="done")]},
    ]
    with ScriptedLLM(script) as llm:
        api_base = llm.api_base
        trajectory = await run_agent(
            model="openai/raw-model", api_base=api_base, api_key=KEY, gateway_url=gateway.url,
            gateway_token=gateway.token, prompt="Find the invoice.",
            config={"record_raw": True, "temperature": 0.3, "extra_args": {"seed": 11}},
        )  # fmt: skip
    assert llm.request_headers[0]["authorization"] == f"Bearer {KEY}"  # the key really was sent
    raw = trajectory.raw_model_calls
    assert [record["step"] for record in raw] == [1, 2]
    first = raw[0]["request"]
    # The request as litellm was given it: the conversation, the tools and the parameters.
    assert first["model"] == "openai/raw-model" and first["api_base"] == api_base
    assert first["messages"] == llm.requests[0]["messages"]
    assert [tool["function"]["name"] for tool in first["tools"]] == [
        tool["function"]["name"] for tool in llm.requests[0]["tools"]
    ]
    assert (first["temperature"], first["seed"]) == (0.3, 11)
    # The response as litellm returned it.
    answer = raw[0]["response"]
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "toolbelt_list_tools"
    assert answer["usage"]["prompt_tokens"] == 300
    assert raw[1]["response"]["choices"][0]["message"]["content"] == "wrapping up"
    assert raw[1]["request"]["messages"][-1]["role"] == "tool"
    # No key, of the endpoint or of the environment, anywhere in the record.
    text = json.dumps(raw)
    assert KEY not in text and ENV_KEY not in text and "api_key" not in text
    # The trajectory itself stays as small as without it.
    stored = model_json(trajectory)
    assert "raw_model_calls" not in stored and "wrapping up" in stored


async def test_off_by_default_and_bounded_per_run(gateway):
    script = [
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"tool_calls": [call("final_answer", answer="done")]},
    ]
    with ScriptedLLM(list(script)) as llm:
        plain = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=gateway.url, gateway_token=gateway.token,
            prompt="p",
        )  # fmt: skip
    assert plain.raw_model_calls == []
    with ScriptedLLM(list(script)) as llm:
        bounded = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=gateway.url, gateway_token=gateway.token,
            prompt="p", config={"record_raw": True, "record_raw_max_bytes": 1024},
        )  # fmt: skip
    # Every call is there by step; those past the bound say how big they were.
    assert [record["step"] for record in bounded.raw_model_calls] == [1, 2]
    assert all(set(record) == {"step", "omitted"} for record in bounded.raw_model_calls)
    assert all(record["omitted"] > 1024 for record in bounded.raw_model_calls)
