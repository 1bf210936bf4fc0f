"""The scripted OpenAI-compatible server, exercised through litellm as agents and judges use it."""

from __future__ import annotations

import json
import time

import httpx
import litellm
import pytest

from atoll.testing.scripted_llm import CONTEXT_LENGTH_EXCEEDED, ScriptedLLM

litellm.suppress_debug_info = True

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _complete(llm: ScriptedLLM, **extra):
    return litellm.completion(
        model="openai/x",
        api_base=llm.api_base,
        api_key="x",
        messages=[{"role": "user", "content": "hello"}],
        max_retries=0,
        **extra,
    )


def test_answers_in_order_and_records_requests():
    with ScriptedLLM([{"content": "first"}, {"content": "second"}]) as llm:
        assert _complete(llm).choices[0].message.content == "first"
        assert _complete(llm, temperature=0.5).choices[0].message.content == "second"
        assert len(llm.requests) == 2
        assert llm.requests[0]["messages"] == [{"role": "user", "content": "hello"}]
        assert llm.requests[1]["temperature"] == 0.5
        assert llm.remaining == 0


def test_tool_calls_parallel_and_malformed_arguments():
    script = [
        {
            "tool_calls": [
                {"name": "lookup", "arguments": {"q": "a"}},
                {"name": "lookup", "arguments": '{"q": '},
            ]
        }
    ]
    with ScriptedLLM(script) as llm:
        message = _complete(llm, tools=TOOLS).choices[0].message
    calls = message.tool_calls
    assert [call.function.name for call in calls] == ["lookup", "lookup"]
    assert json.loads(calls[0].function.arguments) == {"q": "a"}
    assert calls[1].function.arguments == '{"q": '  # sent verbatim, malformed
    assert calls[0].id != calls[1].id


def test_usage_including_reasoning_and_cached_tokens():
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "completion_tokens_details": {"reasoning_tokens": 7},
        "prompt_tokens_details": {"cached_tokens": 40},
    }
    with ScriptedLLM([{"content": "ok", "usage": usage}]) as llm:
        response = _complete(llm)
    assert response.usage.prompt_tokens == 100
    assert response.usage.completion_tokens == 20
    assert response.usage.total_tokens == 120
    assert response.usage.completion_tokens_details.reasoning_tokens == 7
    assert response.usage.prompt_tokens_details.cached_tokens == 40


def test_rate_limit_with_retry_after_header():
    with ScriptedLLM([{"status": 429, "headers": {"Retry-After": "3"}}, {"content": "after"}]) as llm:
        with pytest.raises(litellm.RateLimitError) as caught:
            _complete(llm)
        assert caught.value.response.headers["retry-after"] == "3"
        assert _complete(llm).choices[0].message.content == "after"


def test_server_error_and_context_window_error():
    with ScriptedLLM([{"status": 500}, {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED}]) as llm:
        with pytest.raises(litellm.InternalServerError):
            _complete(llm)
        with pytest.raises(litellm.ContextWindowExceededError):
            _complete(llm)


def test_exhausted_script_fails_loudly():
    with ScriptedLLM([{"content": "only"}]) as llm:
        _complete(llm)
        with pytest.raises(litellm.InternalServerError, match="script exhausted after 1 requests"):
            _complete(llm)
        assert len(llm.requests) == 2


def test_callable_script_sees_the_request():
    def script(body):
        return {"content": f"you said {body['messages'][-1]['content']}"}

    with ScriptedLLM(script) as llm:
        assert _complete(llm).choices[0].message.content == "you said hello"
        assert _complete(llm).choices[0].message.content == "you said hello"


def test_delay_is_applied():
    with ScriptedLLM([{"content": "slow", "delay_s": 0.3}]) as llm:
        started = time.monotonic()
        _complete(llm)
        assert time.monotonic() - started >= 0.3


def test_streaming_returns_same_content_and_tool_calls():
    script = [{"content": "streamed", "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}]}]
    with ScriptedLLM(script) as llm:
        chunks = list(_complete(llm, stream=True, tools=TOOLS))
    response = litellm.stream_chunk_builder(chunks)
    message = response.choices[0].message
    assert message.content == "streamed"
    assert json.loads(message.tool_calls[0].function.arguments) == {"q": 1}


def test_models_endpoint_and_port_released():
    with ScriptedLLM([], model_name="tiny") as llm:
        listing = httpx.get(f"{llm.api_base}/models").json()
        url = llm.url
    assert [model["id"] for model in listing["data"]] == ["tiny"]
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/v1/models", timeout=1)
