"""Every run status, and summarisation, with react_toolbelt on the sample world behind the real environment."""

from __future__ import annotations

import asyncio
import tempfile
import zipfile
from pathlib import Path

import pytest

from agents_runner import run_agent
from atoll.testing.scripted_llm import CONTEXT_LENGTH_EXCEEDED, ScriptedLLM
from atoll.trajectory import AgentReportedStatus, ErrorKind, RunStatus

from .conftest import MCP_TOKEN, assert_every_call_answered_once, call, start_environment

LIST = {
    "tool_calls": [
        call("toolbelt_add_tool", tool_name="filesystem_list_files"),
        call("filesystem_list_files", path="/"),
    ]
}
FAST = {"retry_initial_wait_s": 0.01, "retry_max_wait_s": 2}


@pytest.fixture(scope="module")
def sample_env(sample_benchmark):
    benchmark = sample_benchmark
    world = benchmark.world("world_keystone_consulting")
    with tempfile.TemporaryDirectory(prefix="atoll-agent-world-") as scratch:
        base = Path(scratch)
        with zipfile.ZipFile(benchmark.world_archives[world.world_id]) as archive:
            archive.extractall(base)
        user = {"user_email": world.user_email, "user_name": world.user_name}
        env = start_environment(base / "filesystem", base / ".apps_data", user)
        try:
            yield env
        finally:
            env.stop()


CASES = {
    "completed": (
        [LIST, {"tool_calls": [call("final_answer", answer="listed")]}], {}, {},
        RunStatus.completed, None, AgentReportedStatus.completed,
    ),
    "failed": (
        [{"tool_calls": [call("final_answer", answer="no access", status="blocked")]}], {}, {},
        RunStatus.failed, None, AgentReportedStatus.blocked,
    ),
    "max_steps": ([LIST, LIST, LIST], {}, {"max_steps": 2}, RunStatus.max_steps, None, None),
    "timeout": ([LIST, {"content": "late", "delay_s": 4}], {}, {"timeout_s": 1.5}, RunStatus.timeout, None, None),
    "budget_exhausted": (
        [{**LIST, "usage": {"prompt_tokens": 5000, "completion_tokens": 10}}, LIST], {"token_budget": 4000}, {},
        RunStatus.budget_exhausted, None, None,
    ),
    "error_model_provider": (
        [LIST, {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED}, {"content": "summary"},
         {"status": 400, "body": CONTEXT_LENGTH_EXCEEDED}], {"keep_last_messages": 1}, {},
        RunStatus.error, ErrorKind.model_provider, None,
    ),
    "error_model_provider_retries": ([{"status": 503}] * 3, {**FAST, "max_retries": 2}, {}, RunStatus.error, ErrorKind.model_provider, None),
    "error_agent": (
        [{"tool_calls": [{"name": "filesystem_list_files", "arguments": "{'path': '/'}"}]}] * 2,
        {"max_consecutive_malformed": 2}, {}, RunStatus.error, ErrorKind.agent, None,
    ),
    "error_infrastructure": ([], {}, {"gateway_token": "wrong"}, RunStatus.error, ErrorKind.infrastructure, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
async def test_each_status_is_reached_and_recorded(sample_env, case):
    script, config, arguments, status, kind, reported = CASES[case]
    arguments = {"gateway_token": MCP_TOKEN, **arguments}
    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/scripted", api_base=llm.api_base, gateway_url=sample_env.mcp_url,
            prompt="List the shared drive, then answer.", task_id=f"status-{case}", config=config, **arguments,
        )  # fmt: skip
    assert trajectory.status == status, (trajectory.error, trajectory.end_reason)
    assert (trajectory.error.kind if trajectory.error else None) == kind
    assert trajectory.agent_reported_status == reported
    assert trajectory.task_id == f"status-{case}" and trajectory.ended_at >= trajectory.started_at
    assert_every_call_answered_once(trajectory)
    for listing in trajectory.tool_calls:
        if listing.name == "filesystem_list_files" and not listing.is_error:  # the real server answered
            assert all(folder in listing.result for folder in ("Admin", "Data", "Deliverables", "Research"))


async def test_cancelled_on_the_sample_world(sample_env):
    cancel = asyncio.Event()
    with ScriptedLLM([LIST, {"content": "slow", "delay_s": 5}]) as llm:
        task = asyncio.create_task(
            run_agent(
                model="openai/scripted",
                api_base=llm.api_base,
                gateway_url=sample_env.mcp_url,
                gateway_token=MCP_TOKEN,
                prompt="p",
                cancel=cancel,
            )  # fmt: skip
        )
        while len(llm.requests) < 2:
            await asyncio.sleep(0.02)
        cancel.set()
        trajectory = await asyncio.wait_for(task, 5)
    assert trajectory.status == RunStatus.cancelled and trajectory.error is None
    assert_every_call_answered_once(trajectory)


async def test_a_fact_read_early_survives_compaction_on_the_sample_world(sample_env):
    from agents_runner.summarize import SUMMARY_MARKER

    notes = "/Research/Interviews/Macon_interview_notes_final.txt"
    turns = iter(
        [
            {"tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_text_file"), call("toolbelt_add_tool", tool_name="filesystem_list_files")]},
            {"tool_calls": [call("filesystem_read_text_file", file_path=notes)]},
            *[{"tool_calls": [call("filesystem_list_files", path="/")], "content": " ".join(f"step{n}-{k}" for k in range(120))} for n in range(10)],
            {"tool_calls": [call("final_answer", answer="single-source flour contract")]},
        ]
    )  # fmt: skip

    def script(body):
        if "compress the working history" in str(body["messages"][0]["content"]):
            return {"content": "Read some notes and listed folders."}
        return next(turns)

    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/scripted", api_base=llm.api_base, gateway_url=sample_env.mcp_url, gateway_token=MCP_TOKEN,
            prompt="What issue did the Macon plant raise about flour?",
            config={"context_window": 5000, "keep_last_messages": 4},
        )  # fmt: skip
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.compactions >= 1
    last = llm.requests[-1]["messages"]
    assert not any(m.get("role") == "tool" and "flour" in str(m.get("content")) for m in last)
    summary = next(m["content"] for m in last if SUMMARY_MARKER in str(m.get("content")))
    assert "single-source flour contract" in summary and notes in summary
