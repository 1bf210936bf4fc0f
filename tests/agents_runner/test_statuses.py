"""Every run status is reachable and recorded with the right error kind."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agents_runner import run_agent
from atoll.jsonio import loads_strict, model_json
from atoll.testing.scripted_llm import CONTEXT_LENGTH_EXCEEDED, ScriptedLLM
from atoll.trajectory import ErrorKind, RunStatus

from .conftest import assert_every_call_answered_once, call, tool_messages

FAST_RETRIES = {"retry_initial_wait_s": 0.01, "retry_max_wait_s": 5}


async def _run(llm: ScriptedLLM, gateway, **kwargs):
    kwargs.setdefault("prompt", "Do the task.")
    kwargs.setdefault("gateway_url", gateway.url)
    return await run_agent(
        model=kwargs.pop("model", "openai/scripted"),
        api_base=llm.api_base,
        api_key="x",
        gateway_token=gateway.token,
        **kwargs,
    )


def _busy(_body):
    return {"tool_calls": [call("toolbelt_list_tools")]}


async def test_max_steps_with_warnings_near_the_limit(gateway):
    with ScriptedLLM(_busy) as llm:
        trajectory = await _run(llm, gateway, max_steps=4, config={"limit_warning_steps": 2})
    assert trajectory.status == RunStatus.max_steps
    assert trajectory.steps == 4 and len(llm.requests) == 4
    assert trajectory.error is None
    assert "max_steps=4" in trajectory.end_reason
    notices = [m["content"] for m in llm.requests[3]["messages"] if "[harness]" in str(m.get("content"))]
    assert notices[-1].startswith("[harness] 1 of 4 steps left")
    assert not any("[harness]" in str(m.get("content")) for m in llm.requests[1]["messages"])
    assert_every_call_answered_once(trajectory)


@pytest.mark.serial
async def test_wall_clock_timeout_mid_model_call(gateway):
    script = [{"tool_calls": [call("toolbelt_list_tools")]}, {"content": "late", "delay_s": 5}]
    with ScriptedLLM(script) as llm:
        started = time.monotonic()
        trajectory = await _run(llm, gateway, timeout_s=1.0)
    assert time.monotonic() - started < 4
    assert trajectory.status == RunStatus.timeout
    assert trajectory.error is None
    assert 0.9 <= trajectory.duration_s < 4
    assert_every_call_answered_once(trajectory)


async def test_token_budget_ends_the_run(gateway):
    usage = {"prompt_tokens": 600, "completion_tokens": 10}
    with ScriptedLLM(lambda body: {**_busy(body), "usage": usage}) as llm:
        trajectory = await _run(llm, gateway, config={"token_budget": 1500})
    assert trajectory.status == RunStatus.budget_exhausted
    assert len(llm.requests) == 3  # 610, 1220, 1830 tokens: the third call crosses the budget
    assert trajectory.usage.prompt_tokens == 1800
    assert "token budget" in trajectory.end_reason


async def test_cost_budget_from_litellms_price_map(gateway):
    usage = {"prompt_tokens": 100_000, "completion_tokens": 1_000}
    with ScriptedLLM(lambda body: {**_busy(body), "usage": usage}) as llm:
        trajectory = await _run(llm, gateway, model="openai/gpt-4o", config={"cost_budget_usd": 0.5})
    assert trajectory.status == RunStatus.budget_exhausted
    per_call = trajectory.model_calls[0].usage.cost_usd
    assert per_call > 0.1  # gpt-4o is priced per token in litellm's map
    assert abs(trajectory.usage.cost_usd - per_call * len(trajectory.model_calls)) < 1e-9
    assert trajectory.usage.cost_usd >= 0.5


async def test_rate_limit_honours_retry_after_and_is_recorded(gateway):
    script = [
        {"status": 429, "headers": {"Retry-After": "1"}},
        {"tool_calls": [call("final_answer", answer="ok")]},
    ]
    with ScriptedLLM(script) as llm:
        started = time.monotonic()
        trajectory = await _run(llm, gateway, config=FAST_RETRIES)
    assert time.monotonic() - started >= 1.0  # waited as asked, not the 0.01 s backoff
    assert trajectory.status == RunStatus.completed
    assert trajectory.model_calls[0].retries == 1
    assert "rate_limited" in trajectory.model_calls[0].error


async def test_server_errors_retried_then_model_provider_error(gateway):
    with ScriptedLLM([{"status": 500}] * 3) as llm:
        trajectory = await _run(llm, gateway, config={**FAST_RETRIES, "max_retries": 2})
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.model_provider
    assert "after 2 retries" in trajectory.error.message
    assert len(llm.requests) == 3


async def test_run_retry_budget_caps_retries_across_calls(gateway):
    script = [
        {"status": 503},
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"status": 503},
        {"status": 503},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={**FAST_RETRIES, "retry_budget": 1})
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.model_provider
    assert "retry budget" in trajectory.error.message
    assert len(llm.requests) == 3


async def test_deterministic_4xx_is_not_retried(gateway):
    body = {
        "error": {"message": "invalid api key", "type": "invalid_request_error", "code": "invalid_api_key"}
    }
    with ScriptedLLM([{"status": 401, "body": body}, {"content": "never"}]) as llm:
        trajectory = await _run(llm, gateway, config=FAST_RETRIES)
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.model_provider
    assert len(llm.requests) == 1


async def test_slow_model_response_times_out_and_is_retried(gateway):
    script = [{"content": "slow", "delay_s": 2}, {"tool_calls": [call("final_answer", answer="fast")]}]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={**FAST_RETRIES, "llm_timeout_s": 0.5})
    assert trajectory.status == RunStatus.completed
    assert trajectory.model_calls[0].retries == 1
    assert "transient" in trajectory.model_calls[0].error


async def test_context_window_error_compacts_and_retries_once(gateway):
    script = [
        {"tool_calls": [call("toolbelt_add_tool", tool_name="mail_search_mail")]},
        {"tool_calls": [call("mail_search_mail", query="settlement")]},
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED},
        {"content": "summary: found HX-40917-Q"},  # the summarisation call
        {"tool_calls": [call("final_answer", answer="HX-40917-Q")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"keep_last_messages": 2})
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.compactions == 1
    retried = llm.requests[5]["messages"]
    assert any(
        "HX-40917-Q" in str(m.get("content")) and "[Context summary" in str(m.get("content")) for m in retried
    )


async def test_context_window_error_twice_is_a_model_provider_error(gateway):
    script = [
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED},
        {"content": "summary"},
        {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"keep_last_messages": 1})
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.model_provider
    assert "even after summarisation" in trajectory.error.message


async def test_malformed_tool_call_json_gets_an_error_result_then_error_agent(gateway):
    bad = {"tool_calls": [{"name": "toolbelt_add_tool", "arguments": '{"tool_name": "mail_'}]}
    with ScriptedLLM([bad, bad]) as llm:
        trajectory = await _run(llm, gateway, config={"max_consecutive_malformed": 2})
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.agent
    first = trajectory.tool_calls[0]
    assert first.arguments == '{"tool_name": "mail_'  # the raw string is kept
    assert first.is_error and "not valid JSON" in first.result
    assert_every_call_answered_once(trajectory)


async def test_tool_call_arguments_with_nan_are_not_json_and_the_trajectory_stays_strict(gateway):
    """Python's json reads NaN; JSON has none, no tool takes it, and a trajectory holding it could
    not be written strictly (atoll.jsonio): the model is told, as for any malformed arguments."""
    nan = {"tool_calls": [{"name": "toolbelt_add_tool", "arguments": '{"tool_name": NaN}'}]}
    done = {"tool_calls": [call("final_answer", answer="done", status="completed")]}
    with ScriptedLLM([nan, done]) as llm:
        trajectory = await _run(llm, gateway)
    first = trajectory.tool_calls[0]
    assert first.arguments == '{"tool_name": NaN}'  # the raw string is kept
    assert first.is_error and "not valid JSON (NaN is not JSON" in first.result
    loads_strict(model_json(trajectory))
    assert_every_call_answered_once(trajectory)


async def test_tool_call_timeout_is_a_result_not_the_end(gateway):
    script = [
        {"tool_calls": [call("toolbelt_add_tool", tool_name="code_sleep")]},
        {"tool_calls": [call("code_sleep", seconds=3)]},
        {"tool_calls": [call("final_answer", answer="gave up waiting", status="failed")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"tool_call_timeout_s": 0.5})
    assert trajectory.status == RunStatus.failed
    assert "timed out after 0.5 s" in tool_messages(trajectory)["call_1_0"]
    assert trajectory.tool_calls[1].is_error


async def test_unreachable_gateway_is_an_infrastructure_error(gateway):
    with ScriptedLLM([]) as llm:
        trajectory = await _run(llm, gateway, gateway_url="http://127.0.0.1:9/mcp")
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.infrastructure
    assert "127.0.0.1:9" in trajectory.error.message
    assert llm.requests == []


async def test_wrong_gateway_token_is_an_infrastructure_error(gateway):
    with ScriptedLLM([]) as llm:
        trajectory = await run_agent(
            model="openai/x",
            api_base=llm.api_base,
            api_key="x",
            gateway_url=gateway.url,
            gateway_token="wrong",
            prompt="p",
        )
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.infrastructure


async def test_cancel_event_returns_a_cancelled_trajectory(gateway):
    cancel = asyncio.Event()
    script = [{"tool_calls": [call("toolbelt_list_tools")]}, {"content": "slow", "delay_s": 5}]
    with ScriptedLLM(script) as llm:
        task = asyncio.create_task(_run(llm, gateway, cancel=cancel))
        while len(llm.requests) < 2:
            await asyncio.sleep(0.02)
        cancel.set()
        trajectory = await asyncio.wait_for(task, 3)
    assert trajectory.status == RunStatus.cancelled
    assert trajectory.steps == 2


async def test_gateway_lost_mid_run_is_an_infrastructure_error():
    from fastmcp import FastMCP

    from .conftest import ServedApp

    mcp = FastMCP("short-lived")

    @mcp.tool(name="filesystem_list_files")
    def list_files(path: str = "/") -> list[str]:
        """List files."""
        return ["/a.txt"]

    served = ServedApp(mcp.http_app(path="/mcp"))
    served.server.config.timeout_graceful_shutdown = 0.2
    url = f"http://127.0.0.1:{served.port}/mcp"

    def script(body):
        if len(body["messages"]) > 2:  # second turn: the gateway goes away before the call
            served.__exit__(None, None, None)
        return {"tool_calls": [call("filesystem_list_files")]}

    with served, ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=url, prompt="p", agent="loop",
            config={"tool_call_timeout_s": 5},
        )  # fmt: skip
    assert trajectory.status == RunStatus.error
    assert trajectory.error.kind == ErrorKind.infrastructure
    assert "filesystem_list_files" in trajectory.error.message
    assert "/a.txt" in tool_messages(trajectory)["call_0_0"]
    assert_every_call_answered_once(trajectory)


async def test_gateway_lost_mid_turn_keeps_the_results_of_calls_that_ran():
    from fastmcp import FastMCP

    from .conftest import ServedApp

    mcp = FastMCP("dies-mid-turn")
    served: ServedApp

    @mcp.tool(name="filesystem_list_files")
    def list_files(path: str = "/") -> list[str]:
        """List files."""
        return ["/a.txt"]

    @mcp.tool(name="admin_shutdown")
    def shutdown() -> str:
        """Stop the gateway just after answering."""
        threading.Timer(0.3, lambda: setattr(served.server, "should_exit", True)).start()
        return "shutting down"

    @mcp.tool(name="filesystem_slow_read")
    async def slow_read() -> str:
        """A read the gateway dies during."""
        await asyncio.sleep(3)
        return "never"

    served = ServedApp(mcp.http_app(path="/mcp"))
    served.server.config.timeout_graceful_shutdown = 0.2
    url = f"http://127.0.0.1:{served.port}/mcp"
    turn = [
        call("filesystem_list_files"),
        call("admin_shutdown"),
        call("filesystem_slow_read"),
        call("final_answer", answer="x"),
    ]
    with served, ScriptedLLM([{"tool_calls": turn}]) as llm:
        trajectory = await run_agent(
            model="openai/x", api_base=llm.api_base, gateway_url=url, prompt="p",
            config={"initial_toolbelt": ["filesystem_list_files", "admin_shutdown", "filesystem_slow_read"], "tool_call_timeout_s": 10},
        )  # fmt: skip
    assert trajectory.status == RunStatus.error and trajectory.error.kind == ErrorKind.infrastructure
    results = tool_messages(trajectory)
    assert "/a.txt" in results["call_0_0"] and results["call_0_1"] == "shutting down"
    assert "failed at the gateway" in results["call_0_2"]
    assert results["call_0_3"].startswith("not executed")
    assert trajectory.final_answer is None
    assert_every_call_answered_once(trajectory)


async def test_the_trajectory_so_far_grows_with_the_run_and_leaves_it_untouched(gateway):
    seen: list[tuple[int, str, int]] = []

    def watch(run):
        before = len(run.transcript)
        so_far = run.so_far()
        assert len(run.transcript) == before  # reading it appends nothing to the run
        seen.append((so_far.steps, so_far.status.value, len(so_far.messages)))

    with ScriptedLLM(_busy) as llm:
        trajectory = await _run(llm, gateway, max_steps=3, on_change=watch)
    assert trajectory.status == RunStatus.max_steps
    assert {status for _steps, status, _messages in seen} == {"running"}
    assert [steps for steps, _status, _messages in seen] == sorted(steps for steps, _s, _m in seen)
    assert seen[-1][0] == 3 and seen[-1][2] == len(trajectory.messages)
