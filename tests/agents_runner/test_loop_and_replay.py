"""The loop baseline and the replay oracle, plus the registry."""

from __future__ import annotations

import pytest

from agents_runner import agent_names, run_agent
from atoll.benchmark import ReferenceSolution, ReferenceStep
from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import AgentReportedStatus, ErrorKind, RunStatus

from .conftest import FACT, assert_every_call_answered_once, call, tool_messages


def test_registry_lists_the_three_agents():
    assert {"react_toolbelt", "loop", "replay"} <= set(agent_names())


async def test_unknown_agent_is_a_clear_error(gateway):
    with pytest.raises(AtollError, match="unknown agent 'nope'; known agents: loop, react_toolbelt, replay"):
        await run_agent(model="openai/x", gateway_url=gateway.url, prompt="p", agent="nope")


async def test_loop_exposes_all_tools_and_stops_on_a_text_reply(gateway):
    script = [
        {
            "tool_calls": [
                call("mail_search_mail", query="Halvorsen"),
                call("filesystem_list_files", path="/Reports"),
            ]
        },
        {"content": "The reference is HX-40917-Q."},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/x",
            api_base=llm.api_base,
            api_key="x",
            gateway_url=gateway.url,
            gateway_token=gateway.token,
            prompt="Find the reference.",
            agent="loop",
        )
    assert trajectory.status == RunStatus.completed
    assert trajectory.final_answer == "The reference is HX-40917-Q."
    assert trajectory.agent == "loop"
    names = {tool["function"]["name"] for tool in llm.requests[0]["tools"]}
    assert {"mail_search_mail", "mail_send_mail", "filesystem_read_text_file"} <= names
    assert "final_answer" not in names
    results = tool_messages(trajectory)
    assert FACT in results["call_0_0"] and "/Reports/q3.txt" in results["call_0_1"]
    assert_every_call_answered_once(trajectory)


async def test_loop_with_an_empty_reply_fails(gateway):
    with ScriptedLLM([{"content": ""}]) as llm:
        trajectory = await run_agent(
            model="openai/x",
            api_base=llm.api_base,
            api_key="x",
            gateway_url=gateway.url,
            gateway_token=gateway.token,
            prompt="p",
            agent="loop",
        )
    assert trajectory.status == RunStatus.failed
    assert trajectory.final_answer is None


async def test_replay_runs_the_reference_solution_without_a_model(gateway):
    solution = ReferenceSolution(
        steps=[
            ReferenceStep(tool="mail_search_mail", arguments={"query": "Halvorsen"}),
            ReferenceStep(
                tool="mail_send_mail",
                arguments={"to_email": "cfo@example.com", "subject": "Wire", "body": "Reference HX-40917-Q"},
            ),
        ],
        final_answer="HX-40917-Q",
    )
    sent_before = len(gateway.world.sent)
    trajectory = await run_agent(
        model="replay",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt="Send the reference to the CFO.",
        agent="replay",
        reference_solution=solution,
        task_id="t1",
    )
    assert trajectory.status == RunStatus.completed
    assert trajectory.agent_reported_status == AgentReportedStatus.completed
    assert trajectory.final_answer == "HX-40917-Q"
    assert trajectory.model_calls == [] and trajectory.usage.total_tokens == 0
    assert gateway.world.sent[sent_before:] == [
        {"to": "cfo@example.com", "subject": "Wire", "body": "Reference HX-40917-Q"}
    ]
    assert [c.name for c in trajectory.tool_calls] == ["mail_search_mail", "mail_send_mail"]
    assert trajectory.task_id == "t1" and trajectory.steps == 3
    assert_every_call_answered_once(trajectory)


async def test_replay_fails_on_a_broken_reference_step(gateway):
    solution = ReferenceSolution(
        steps=[ReferenceStep(tool="filesystem_read_text_file", arguments={"file_path": "/missing.txt"})],
        final_answer="x",
    )
    trajectory = await run_agent(
        model="replay",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt="p",
        agent="replay",
        reference_solution=solution,
    )
    assert trajectory.status == RunStatus.failed
    assert trajectory.error.kind == ErrorKind.agent
    assert "reference step 1 (filesystem_read_text_file) failed" in trajectory.error.message
    assert "no such file: /missing.txt" in trajectory.error.message


async def test_replay_without_a_solution_is_a_user_error(gateway):
    with pytest.raises(AtollError, match="has no reference_solution"):
        await run_agent(model="replay", gateway_url=gateway.url, prompt="p", agent="replay", task_id="t9")
