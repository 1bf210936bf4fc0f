"""A trial's trajectory carries its exchanges with the world's personas as coworker turns, with
the coworker model's usage and cost counted apart from the agent's (docs/coworkers.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from atoll.benchmark import Task
from atoll.coworkers import CoworkerExchange
from atoll.trajectory import RunStatus, Trajectory, Usage
from atoll.trial import TrialSpec
from grader import Snapshot
from orchestrator.executors.steps import build_result, with_coworker_turns
from tests.grader import factories as f

LOG = ".apps_data/coworkers/exchanges.jsonl"


def _line(message_id: str, cost: float, tokens: int) -> str:
    return (
        CoworkerExchange(
            persona="Margaret Okonkwo",
            persona_email="margaret@client.example",
            channel="mail",
            conversation="t",
            message_id=message_id,
            message="What is the cap?",
            reply="$1.85M",
            status="replied",
            model="openai/coworker",
            usage={"prompt_tokens": tokens, "completion_tokens": 7},
            cost_usd=cost,
            sent_at="2024-03-01T09:00:00+00:00",
        ).model_dump_json()
        + "\n"
    )


def test_new_exchanges_become_coworker_turns_with_their_own_usage(tmp_path):
    earlier = _line("<before@x>", 1.0, 1000)  # already in the populated world: not this trial's
    before = Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a": "a", LOG: earlier}))
    after = Snapshot(
        f.write_snapshot(
            tmp_path / "a.tar.gz",
            {"filesystem/a": "a", LOG: earlier + _line("<m1@x>", 0.002, 300) + _line("<m2@x>", 0.001, 200)},
        )
    )
    now = datetime(2024, 3, 1, tzinfo=UTC)
    agent_usage = Usage(prompt_tokens=5000, completion_tokens=100, cost_usd=0.5)
    trajectory = Trajectory(
        agent="replay", model="m", status=RunStatus.completed, started_at=now, ended_at=now, usage=agent_usage
    )
    recorded = with_coworker_turns(trajectory, before, after)
    assert [t.message_id for t in recorded.coworker_turns] == ["<m1@x>", "<m2@x>"]
    assert recorded.coworker_usage.prompt_tokens == 500 and recorded.coworker_usage.completion_tokens == 14
    assert abs(recorded.coworker_usage.cost_usd - 0.003) < 1e-9
    assert recorded.usage == agent_usage  # the agent's own usage is untouched
    # The trial's result counts them apart, and in what the trial cost.
    rubric = [{"verifier_id": "t-1", "criteria": "c"}]
    task = Task.model_validate({"task_id": "t", "world_id": "w", "prompt": "p", "rubric": rubric})
    spec = TrialSpec(
        experiment="r",
        task_id="t",
        world_id="w",
        world_digest="d",
        agent_name="a",
        agent="replay",
        model="m",
        run_index=0,
    )
    result = build_result(spec, task, recorded, None, attempt=1, duration_s=0.0, uris={})
    assert (result.coworker_prompt_tokens, result.coworker_completion_tokens) == (500, 14)
    assert abs(result.coworker_cost_usd - 0.003) < 1e-9 and abs(result.cost_usd - 0.503) < 1e-9
    assert result.agent_cost_usd == 0.5
    unchanged = Snapshot(f.write_snapshot(tmp_path / "c.tar.gz", {"filesystem/a": "b"}))
    assert with_coworker_turns(trajectory, unchanged, unchanged) is trajectory
