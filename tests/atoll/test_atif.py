"""ATIF out and in (atoll/atif): an atoll trajectory exported and read back is the same
trajectory; a trajectory from another harness reads as the grader needs it; bad ATIF is refused
naming the problem. Validation against Harbor's own models: test_atif_harbor.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll.atif import ATIF_VERSION, AtifTrajectory, atif_json, from_atif, is_atif, to_atif
from atoll.errors import AtollError
from atoll.trajectory import ModelCall, RunStatus, ToolCall, Trajectory, Usage
from atoll_cli.cli import app
from grader.inputs import load_trajectory

STARTED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ENDED = datetime(2026, 12, 1, 9, 3, tzinfo=UTC)


def react_trajectory() -> Trajectory:
    """A ReAct-style run: reasoning with signed thinking blocks, two calls in one turn (one with
    malformed arguments), a harness notice, and a final answer given through a tool."""
    return Trajectory(
        trial_id="trial-7",
        task_id="task-7",
        agent="react_toolbelt",
        model="anthropic/claude-sonnet-4-5",
        agent_config={"max_steps": 50},
        status=RunStatus.completed,
        agent_reported_status="completed",
        final_answer="Q3 revenue was 1,204,330.",
        end_reason="final_answer called",
        messages=[
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "What was Q3 revenue?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "The report is in /Reports.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {
                            "name": "filesystem_read_text_file",
                            "arguments": '{"file_path": "/Reports/q3.txt"}',
                        },
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "mail_search_mail", "arguments": '{"query": '},
                    },
                ],
                "provider_fields": {
                    "thinking_blocks": [
                        {"type": "thinking", "thinking": "The report is in /Reports.", "signature": "SIG"}
                    ]
                },
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "Q3 revenue: 1,204,330"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "error: arguments are not valid JSON"},
            {"role": "user", "content": "[harness] 3 of 50 steps left"},
            {
                "role": "assistant",
                "content": "Done.",
                "tool_calls": [
                    {
                        "id": "toolu_3",
                        "type": "function",
                        "function": {
                            "name": "final_answer",
                            "arguments": '{"answer": "Q3 revenue was 1,204,330."}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_3", "content": "answer recorded"},
        ],
        tool_calls=[
            ToolCall(
                id="toolu_1",
                step=1,
                name="filesystem_read_text_file",
                arguments={"file_path": "/Reports/q3.txt"},
                result="Q3 revenue: 1,204,330",
                duration_s=0.12,
            ),
            ToolCall(
                id="toolu_2",
                step=1,
                name="mail_search_mail",
                arguments='{"query": ',
                result="error: arguments are not valid JSON",
                is_error=True,
                error="arguments are not valid JSON",
            ),
            ToolCall(
                id="toolu_3",
                step=2,
                name="final_answer",
                arguments={"answer": "Q3 revenue was 1,204,330."},
                result="answer recorded",
            ),
        ],
        model_calls=[
            ModelCall(
                step=1,
                model="anthropic/claude-sonnet-4-5",
                usage=Usage(
                    prompt_tokens=1200,
                    completion_tokens=300,
                    reasoning_tokens=120,
                    cached_tokens=800,
                    cache_write_tokens=100,
                    cost_usd=0.0123,
                ),
                duration_s=2.5,
                retries=1,
                error="recovered from rate_limited: 429",
            ),
            ModelCall(
                step=2,
                model="anthropic/claude-sonnet-4-5",
                usage=Usage(prompt_tokens=1600, completion_tokens=40, cost_usd=0.0061),
                duration_s=0.8,
            ),
        ],
        usage=Usage(
            prompt_tokens=2800,
            completion_tokens=340,
            reasoning_tokens=120,
            cached_tokens=800,
            cache_write_tokens=100,
            cost_usd=0.0184,
        ),
        steps=2,
        started_at=STARTED,
        ended_at=ENDED,
        coworker_usage=Usage(prompt_tokens=300, completion_tokens=20, cost_usd=0.0004),
        compactions=0,
        todos=[],  # a key a run adds, empty: it comes back empty, not missing
        retries=1,
    )


def test_an_exported_trajectory_reads_back_as_the_same_trajectory():
    original = react_trajectory()
    data = json.loads(atif_json(original))
    assert data["schema_version"] == ATIF_VERSION
    back = from_atif(data)
    assert back.model_dump(mode="json") == original.model_dump(mode="json")


def test_steps_carry_messages_reasoning_tool_calls_observations_and_metrics():
    atif = to_atif(react_trajectory())
    assert [step.source for step in atif.steps] == ["system", "user", "agent", "user", "agent"]
    first = atif.steps[2]
    assert first.reasoning_content == "The report is in /Reports."
    assert [(c.function_name, c.arguments) for c in first.tool_calls] == [
        ("filesystem_read_text_file", {"file_path": "/Reports/q3.txt"}),
        ("mail_search_mail", {}),  # malformed: kept as sent in extra
    ]
    assert first.tool_calls[1].extra == {"raw_arguments": '{"query": '}
    results = first.observation.results
    assert [(r.source_call_id, r.content) for r in results] == [
        ("toolu_1", "Q3 revenue: 1,204,330"),
        ("toolu_2", "error: arguments are not valid JSON"),
    ]
    assert results[1].extra["is_error"] is True
    assert (first.metrics.prompt_tokens, first.metrics.completion_tokens, first.metrics.cached_tokens) == (
        1200,
        300,
        800,
    )
    assert first.metrics.cost_usd == pytest.approx(0.0123)
    assert first.metrics.extra["reasoning_tokens"] == 120
    assert first.llm_call_count == 1
    assert first.extra["provider_fields"]["thinking_blocks"][0]["signature"] == "SIG"
    assert atif.final_metrics.total_prompt_tokens == 2800
    assert atif.final_metrics.total_cost_usd == pytest.approx(0.0184)
    assert atif.final_metrics.total_steps == 5
    assert (atif.agent.name, atif.agent.model_name, atif.session_id) == (
        "react_toolbelt",
        "anthropic/claude-sonnet-4-5",
        "trial-7",
    )


def test_a_run_without_messages_still_exports_one_step():
    empty = Trajectory(agent="loop", model="m", status=RunStatus.error, started_at=STARTED, ended_at=STARTED)
    atif = to_atif(empty)
    assert len(atif.steps) == 1 and "no messages" in atif.steps[0].message
    assert from_atif(json.loads(atif_json(empty))).status is RunStatus.error


FOREIGN = {
    "schema_version": "ATIF-v1.8",
    "session_id": "run-42",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-5"},
    "steps": [
        {"step_id": 1, "timestamp": "2026-11-02T10:00:00Z", "source": "user", "message": "Fix the sheet."},
        {
            "step_id": 2,
            "timestamp": "2026-11-02T10:00:05Z",
            "source": "agent",
            "message": "Let me look.",
            "reasoning_content": "Open it first.",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "read", "arguments": {"path": "a.xlsx"}},
                {"tool_call_id": "c2", "function_name": "list", "arguments": {}},
            ],
            "observation": {
                "results": [
                    {
                        "source_call_id": "c1",
                        "content": [
                            {"type": "text", "text": "B6=0.07"},
                            {"type": "image", "source": {"media_type": "image/png", "path": "images/s1.png"}},
                        ],
                    }
                ]
            },
            "metrics": {
                "prompt_tokens": 500,
                "completion_tokens": 50,
                "cached_tokens": 100,
                "cost_usd": 0.002,
                "logprobs": [-0.1],
            },
            "llm_call_count": 1,
        },
        {
            "step_id": 3,
            "timestamp": "2026-11-02T10:01:00Z",
            "source": "agent",
            "message": "B6 is now 0.08.",
            "metrics": {"prompt_tokens": 700, "completion_tokens": 20},
        },
        {
            "step_id": 4,
            "timestamp": "2026-11-02T10:02:00",  # no zone: read as UTC
            "source": "system",
            "message": "",
            "observation": {"results": [{"content": "terminal closed"}]},
        },
    ],
    "final_metrics": {"total_prompt_tokens": 1200, "total_completion_tokens": 70, "total_cost_usd": 0.004},
}


def test_a_trajectory_from_another_harness_reads_as_a_completed_run_answering_its_last_text():
    trajectory = from_atif(FOREIGN)
    assert (trajectory.agent, trajectory.model, trajectory.trial_id) == (
        "terminus-2",
        "openai/gpt-5",
        "run-42",
    )
    assert trajectory.status is RunStatus.completed
    assert trajectory.final_answer == "B6 is now 0.08."
    assert trajectory.steps == 2
    assert trajectory.started_at == datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    assert trajectory.duration_s == 120
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "system", "user"]
    answered = {m["tool_call_id"]: m["content"] for m in trajectory.messages if m["role"] == "tool"}
    assert answered == {
        "c1": "B6=0.07\n[image: images/s1.png]",
        "c2": "(no observation recorded for this call)",
    }
    assert trajectory.messages[1]["reasoning_content"] == "Open it first."
    assert json.loads(trajectory.messages[1]["tool_calls"][0]["function"]["arguments"]) == {"path": "a.xlsx"}
    assert [(c.step, c.usage.prompt_tokens, c.usage.cached_tokens) for c in trajectory.model_calls] == [
        (1, 500, 100),
        (2, 700, 0),
    ]
    assert (trajectory.usage.prompt_tokens, trajectory.usage.completion_tokens) == (1200, 70)
    assert trajectory.usage.cost_usd == pytest.approx(0.004)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["steps"][1].update(step_id=3), "step_id"),
        (lambda d: d["steps"][0].update(reasoning_content="x"), "reasoning_content"),
        (lambda d: d["steps"][1]["observation"]["results"][0].update(source_call_id="c9"), "c9"),
        (lambda d: d["steps"][1].update(color="red"), "color"),
        (lambda d: d.update(schema_version="ATIF-v9.0"), "schema_version"),
        (lambda d: d.update(steps=[]), "steps"),
    ],
    ids=["step-order", "user-reasoning", "unknown-call", "unknown-key", "version", "no-steps"],
)
def test_invalid_atif_is_refused_naming_the_problem(change, named, tmp_path: Path):
    data = json.loads(json.dumps(FOREIGN))
    change(data)
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(data))
    with pytest.raises(AtollError) as caught:
        load_trajectory(path)
    assert str(path) in caught.value.message and named in caught.value.message
    assert "ATIF" in caught.value.message


def test_the_grader_tells_atif_from_atoll_trajectories_by_content(tmp_path: Path):
    original = react_trajectory()
    (tmp_path / "atoll.json").write_text(original.model_dump_json())
    (tmp_path / "atif.json").write_text(atif_json(original))
    assert not is_atif(json.loads((tmp_path / "atoll.json").read_text()))
    assert is_atif(json.loads((tmp_path / "atif.json").read_text()))
    assert load_trajectory(tmp_path / "atif.json") == load_trajectory(tmp_path / "atoll.json")


def test_atoll_export_atif_writes_the_file(tmp_path: Path):
    source = tmp_path / "trajectory.json"
    source.write_text(react_trajectory().model_dump_json())
    result = CliRunner().invoke(
        app, ["export", "atif", str(source), "-o", str(tmp_path / "out" / "atif.json")]
    )
    assert result.exit_code == 0, result.output
    written = AtifTrajectory.model_validate_json((tmp_path / "out" / "atif.json").read_text())
    assert written == to_atif(react_trajectory())
    missing = CliRunner().invoke(
        app, ["export", "atif", str(tmp_path / "nope.json"), "-o", str(tmp_path / "x.json")]
    )
    assert (
        isinstance(missing.exception, AtollError) and "nope.json: no such file" in missing.exception.message
    )
