"""The agent registry's flags decide what a run needs; no agent name is special-cased."""

from __future__ import annotations

import pytest

from agents_runner import registry
from agents_runner.registry import get_agent, register_agent
from agents_runner.runner import prepare_run
from atoll.benchmark import ReferenceSolution
from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.llm.preflight import experiment_probes
from atoll.trajectory import RunStatus


@pytest.fixture
def oracle_agent():
    """An agent other than replay that, like it, replays a solution and calls no model."""
    registry._load()

    @register_agent("scripted_oracle", description="test", uses_model=False, needs_reference_solution=True)
    async def scripted_oracle(run) -> RunStatus:
        return RunStatus.completed

    yield "scripted_oracle"
    registry._AGENTS.pop("scripted_oracle")


def test_an_agent_that_needs_a_reference_solution_is_refused_without_one(oracle_agent):
    with pytest.raises(AtollError) as info:
        prepare_run(model="none", prompt="p", agent=oracle_agent, task_id="t-1")
    assert info.value.code == "no_reference_solution"
    assert oracle_agent in info.value.message and "t-1" in info.value.message
    _, run = prepare_run(
        model="none", prompt="p", agent=oracle_agent, reference_solution=ReferenceSolution(final_answer="42")
    )
    assert run.model_client is None  # uses_model=False: no client is built


def test_the_preflight_probes_only_agents_whose_registry_flag_says_they_call_a_model(oracle_agent):
    spec = ExperimentSpec(
        name="e",
        benchmark="b",
        agents=[
            {"name": "oracle", "agent": oracle_agent, "model": "openai/unused"},
            {
                "name": "react",
                "agent": "react_toolbelt",
                "model": "openai/m",
                "api_base": "http://127.0.0.1:9",
            },
        ],
    )
    probes = experiment_probes(spec, uses_model=lambda name: get_agent(name).uses_model)
    assert [(probe.model, probe.used_by) for probe in probes] == [("openai/m", ["agent react"])]


def test_the_replay_oracle_is_flagged_not_named():
    replay = get_agent("replay")
    assert (replay.uses_model, replay.needs_reference_solution) == (False, True)
