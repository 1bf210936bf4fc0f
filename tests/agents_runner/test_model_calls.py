"""What reaches the provider and what comes back: arguments, usage, cost, time notices."""

from __future__ import annotations

from agents_runner import run_agent
from atoll.llm import ModelErrorKind, classify, retry_after_s
from atoll.testing.scripted_llm import ScriptedLLM, refused_api_base
from atoll.trajectory import RunStatus

from .conftest import call

USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 200,
    "completion_tokens_details": {"reasoning_tokens": 150},
    "prompt_tokens_details": {"cached_tokens": 600},
}


async def test_arguments_pass_through_and_usage_is_recorded_per_call(gateway):
    script = [
        {"tool_calls": [call("toolbelt_list_tools")], "usage": USAGE},
        {"tool_calls": [call("final_answer", answer="done")], "usage": USAGE},
    ]
    config = {
        "reasoning_effort": "high",
        "temperature": 0.2,
        "extra_args": {"seed": 7, "top_p": 0.9},
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 4e-6,
    }
    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/my-vllm-model", api_base=llm.api_base, gateway_url=gateway.url,
            gateway_token=gateway.token, prompt="p", config=config,
        )  # fmt: skip
    sent = llm.requests[0]
    assert sent["model"] == "my-vllm-model"
    assert (sent["reasoning_effort"], sent["temperature"], sent["seed"], sent["top_p"]) == (
        "high",
        0.2,
        7,
        0.9,
    )
    assert llm.request_headers[0]["authorization"] == "Bearer none"  # local servers need no real key
    assert trajectory.status == RunStatus.completed
    first = trajectory.model_calls[0]
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (1000, 200)
    assert (first.usage.reasoning_tokens, first.usage.cached_tokens) == (150, 600)
    assert abs(first.usage.cost_usd - (1000 * 1e-6 + 200 * 4e-6)) < 1e-12
    assert trajectory.usage.prompt_tokens == 2000 and trajectory.usage.reasoning_tokens == 300
    assert abs(trajectory.usage.cost_usd - 2 * first.usage.cost_usd) < 1e-12
    assert first.step == 1 and trajectory.model_calls[1].step == 2 and first.duration_s > 0


async def test_remaining_time_is_shown_when_it_runs_low(gateway):
    script = [{"tool_calls": [call("final_answer", answer="quick")]}]
    with ScriptedLLM(script) as llm:
        await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=gateway.url, gateway_token=gateway.token,
            prompt="p", timeout_s=30, config={"limit_warning_fraction": 1.0},
        )  # fmt: skip
    notice = llm.requests[0]["messages"][-1]["content"]
    assert notice.startswith("[harness] 250 of 250 steps left") and "s of 30 s left" in notice
    assert "final_answer" in notice


def test_transient_classification_and_retry_after_parsing():
    import httpx
    import litellm

    response = httpx.Response(429, headers={"retry-after": "7"}, request=httpx.Request("POST", "http://x"))
    limited = litellm.RateLimitError("slow down", llm_provider="openai", model="x", response=response)
    error = classify(limited, model="openai/x", api_base=None)
    assert error.kind is ModelErrorKind.rate_limited and error.retryable and error.retry_after_s == 7.0
    assert retry_after_s(limited) == 7.0
    bad = litellm.BadRequestError("bad", llm_provider="openai", model="x")
    assert classify(bad, model="openai/x", api_base=None).kind is ModelErrorKind.content
    window = litellm.ContextWindowExceededError("too long", llm_provider="openai", model="x")
    assert classify(window, model="openai/x", api_base=None).kind is ModelErrorKind.context_window


async def test_streamed_responses_give_the_same_turns_and_usage(gateway):
    script = [
        {"tool_calls": [call("toolbelt_list_tools"), call("todo_write", todos=[{"id": "a", "content": "x"}])], "usage": USAGE},
        {"content": "finishing", "tool_calls": [call("todo_write", todos=[{"id": "a", "status": "completed"}], merge=True),
                                                call("final_answer", answer="streamed answer")]},
    ]  # fmt: skip
    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=gateway.url, gateway_token=gateway.token,
            prompt="p", config={"stream": True},
        )  # fmt: skip
    assert all(body.get("stream") is True for body in llm.requests)
    assert trajectory.status == RunStatus.completed and trajectory.final_answer == "streamed answer"
    assert trajectory.model_calls[0].usage.prompt_tokens == 1000
    assert trajectory.model_calls[0].usage.reasoning_tokens == 150
    assert len(trajectory.tool_calls) == 4


async def test_a_configured_endpoint_that_refuses_connections_is_a_configuration_error_not_retried(gateway):
    api_base = refused_api_base()
    trajectory = await run_agent(
        model="openai/x", api_base=api_base, gateway_url=gateway.url, gateway_token=gateway.token,
        prompt="p", config={"max_retries": 2, "retry_initial_wait_s": 0.01},
    )  # fmt: skip
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == "model_provider" and trajectory.error.model_error == "configuration"
    assert trajectory.model_calls[0].retries == 0
    assert api_base in trajectory.error.message and "connection refused" in trajectory.error.message
