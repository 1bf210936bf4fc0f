"""The agent registry's flags decide what a run needs; no agent name is special-cased."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

import agents_runner.agents as agents_package
from agents_runner import registry
from agents_runner.registry import get_agent, register_agent
from agents_runner.runner import prepare_run
from atoll.benchmark import ReferenceSolution
from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.llm.preflight import experiment_probes
from atoll.trajectory import RunStatus
from tests.fresh_interpreter import run_fresh

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def oracle_agent():
    """An agent other than replay that, like it, replays a solution and calls no model."""

    @register_agent("scripted_oracle", description="test", uses_model=False, needs_reference_solution=True)
    async def scripted_oracle(run) -> RunStatus:
        return RunStatus.completed

    yield "scripted_oracle"
    registry.AGENTS.remove("scripted_oracle")


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


def test_every_built_in_agent_is_declared_and_its_module_registers_it():
    # A declaration is what lets `atoll run` check an experiment without importing agents.
    modules = {f"agents_runner.agents.{m.name}" for m in pkgutil.iter_modules(agents_package.__path__)}
    declared = {name: registry.AGENTS.entry(name) for name in ("loop", "react_toolbelt", "replay")}
    assert {entry.module for entry in declared.values()} == modules, "declare the agent in registry.py"
    for name, entry in declared.items():
        spec = get_agent(name)
        assert spec.run.__module__ == entry.module, name
        assert spec.description == entry.metadata["description"], name


def test_a_declared_agent_cannot_restate_its_flags_differently():
    with pytest.raises(ValueError, match="uses_model"):
        register_agent("replay", uses_model=True)(get_agent("replay").run)
    assert get_agent("replay").uses_model is False


def test_an_undeclared_agent_is_found_in_the_registry(oracle_agent):
    entry = registry.agent_entry(oracle_agent)
    assert (entry.uses_model, entry.needs_reference_solution) == (False, True)
    assert entry.module == __name__
    with pytest.raises(AtollError) as info:
        registry.agent_entry("no_such_agent")
    assert info.value.code == "unknown_agent"
    assert "'no_such_agent'" in info.value.message and "react_toolbelt" in info.value.message


def test_checking_an_experiments_agents_imports_no_agent():
    # What `atoll run` checks before anything runs reads the table: no agent module, so
    # neither litellm nor fastmcp's client, is imported (seconds of CPU for a resume).
    code = (
        "import json, sys\n"
        "from atoll.experiment import ExperimentSpec\n"
        "from orchestrator.executors.steps import validate_agents\n"
        "from agents_runner.registry import agent_entry\n"
        "spec = ExperimentSpec(name='e', benchmark='b', agents=[\n"
        "    {'name': 'r', 'agent': 'react_toolbelt', 'model': 'openai/m', 'config': {'max_steps': 5}},\n"
        "    {'name': 'o', 'agent': 'replay', 'model': 'replay'}])\n"
        "validate_agents(spec)\n"
        "flags = [agent_entry(a).uses_model for a in ('react_toolbelt', 'replay', 'loop')]\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('litellm', 'fastmcp', 'mcp')\n"
        "         or m.startswith(('agents_runner.agents.', 'agents_runner.runner'))]\n"
        "print(json.dumps({'flags': flags, 'heavy': sorted(heavy)}))\n"
    )
    report, _ = run_fresh(code, timeout=120)
    assert report == {"flags": [True, False, True], "heavy": []}
