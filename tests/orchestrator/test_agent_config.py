"""What of a trial's agent config reaches the agent: AgentConfig fields only, by declaration."""

from __future__ import annotations

import pytest

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.trial import TrialSpec
from orchestrator.executors import steps
from orchestrator.executors.instant import InstantExecutor


def _experiment(config: dict) -> ExperimentSpec:
    return ExperimentSpec(name="e", benchmark="b", agents=[{"name": "a", "agent": "loop", "config": config}])


def test_the_agent_gets_its_options_without_the_orchestrators_keys_or_dry_run_knobs():
    trial = TrialSpec(
        experiment="e",
        task_id="t",
        world_id="w",
        world_digest="d",
        agent_name="a",
        agent="loop",
        model="m",
        run_index=0,
        agent_config={"max_steps": 5, "api_base": "http://x", "instant_pass_rate": 1.0, "toolbelt_size": 3},
    )
    assert steps.agent_config(trial) == {"max_steps": 5, "toolbelt_size": 3}


def test_a_misspelled_agent_option_fails_the_experiment_naming_it():
    steps.validate_agents(_experiment({"toolbelt_size": 3, "instant_delay_s": 0.1}))
    with pytest.raises(AtollError) as info:
        steps.validate_agents(_experiment({"toolbelt_sise": 3}))
    assert info.value.code == "bad_experiment" and "agents.0.config: toolbelt_sise" in info.value.message


def test_a_mistyped_dry_run_knob_fails_the_instant_executor_naming_it():
    with pytest.raises(AtollError) as info:
        InstantExecutor(None, _experiment({"instant_pass_rate": "high"}))
    assert "agents.0.config: instant_pass_rate" in info.value.message
