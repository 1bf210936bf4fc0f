"""An experiment's coworker: block follows the judge block's key rules and parameter profiles, and
reaches the environments a local run starts (docs/coworkers.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from atoll.errors import AtollError
from atoll.experiment import experiment_endpoints
from atoll.experiment_file import parse_experiment
from atoll.llm.admission import experiment_problem
from atoll.llm.endpoints import KeyPolicy


def _spec(coworker: dict) -> str:
    return yaml.safe_dump(
        {
            "name": "e",
            "benchmark": "bench",
            "agents": [{"name": "a", "model": "replay"}],
            "coworker": coworker,
        }
    )


@pytest.mark.parametrize(
    ("coworker", "field"),
    [
        ({"model": "openai/c", "extra_args": {"api_key": "sk-inline"}}, "coworker.extra_args.api_key"),
        ({"model": "openai/c", "extra_args": {"base_url": "http://evil"}}, "coworker.extra_args.base_url"),
        ({"model": "openai/c", "api_key": "sk-inline"}, "coworker.api_key"),
        ({"api_base": "http://127.0.0.1:9/v1"}, "coworker"),  # an endpoint without a model
        ({"model": "openai/c", "max_replies": -1}, "coworker.max_replies"),
    ],
)
def test_keys_routing_and_bad_values_in_the_coworker_block_are_refused(coworker, field):
    with pytest.raises(AtollError) as raised:
        parse_experiment(_spec(coworker), source="exp.yaml")
    assert raised.value.code == "bad_experiment" and field in raised.value.message
    assert "sk-inline" not in raised.value.message


def test_a_submitted_coworker_endpoint_needs_the_allow_list_or_a_provisioned_secret():
    spec = parse_experiment(_spec({"model": "openai/c", "api_base": "https://elsewhere.example/v1"}))
    problem = experiment_problem(spec, KeyPolicy.current({}))
    assert problem and problem.startswith("coworker.api_base:")
    secret = parse_experiment(
        _spec({"model": "openai/c", "api_base": "https://x.example/v1", "api_key_secret": "NOPE"})
    )
    assert experiment_problem(secret, KeyPolicy.current({})).startswith("coworker.api_key_secret:")
    assert ("openai/c", "https://elsewhere.example/v1") in experiment_endpoints(spec)


def test_a_parameter_the_model_refuses_is_refused_naming_the_coworker():
    with pytest.raises(AtollError, match="coworker: model xai/grok-4 does not accept thinking: high"):
        parse_experiment(_spec({"model": "xai/grok-4", "thinking": "high"}))


def test_a_local_run_gives_its_environments_the_block_the_seed_and_a_reply_cache(tmp_path: Path):
    from environment import EnvironmentSettings
    from orchestrator.executors.local import _coworker_settings

    spec = parse_experiment(
        _spec({"model": "openai/c", "api_base": "http://127.0.0.1:9/v1", "max_replies": 3})
    )
    spec = spec.model_copy(update={"seed": 11})
    settings = EnvironmentSettings(
        fs_root=tmp_path / "f", apps_data_root=tmp_path / "a", **_coworker_settings(spec, tmp_path / "out")
    )
    assert (settings.coworker_model, settings.coworker_api_base) == ("openai/c", "http://127.0.0.1:9/v1")
    assert (settings.coworker_seed, settings.coworker_max_replies) == (11, 3)
    assert settings.coworker_cache_dir == tmp_path / "out" / ".cache" / "coworkers"


def test_another_coworker_model_changes_a_runs_configuration_and_none_keeps_old_fingerprints(tmp_path):
    from atoll.loader import load_benchmark
    from orchestrator.fingerprint import identity_document, incompatible_changes
    from orchestrator.planner import plan_trials
    from tests.atoll.factories import write_benchmark

    root = write_benchmark(tmp_path / "bench")

    def document(coworker: dict | None) -> dict:
        data = {
            "name": "e",
            "benchmark": str(root),
            "agents": [{"name": "a", "model": "replay", "agent": "replay"}],
        }
        spec = parse_experiment(yaml.safe_dump(data | ({"coworker": coworker} if coworker else {})))
        return identity_document(spec, plan_trials(load_benchmark(root), spec))

    without = document(None)
    assert "coworker" not in without  # runs recorded before coworkers keep their fingerprint
    first = document({"model": "openai/a", "api_base": "http://127.0.0.1:9/v1"})
    assert (
        incompatible_changes(first, document({"model": "openai/a", "api_base": "http://127.0.0.1:8/v1"}))
        == []
    )
    assert incompatible_changes(first, document({"model": "openai/b"})) == ["coworker: openai/a → openai/b"]
    assert incompatible_changes(without, first) == ["coworker: (none) → openai/a"]
    assert incompatible_changes(first, document({"model": "openai/a", "max_replies": 2})) == [
        "coworker: openai/a → openai/a (its parameters changed)"
    ]


def test_kubernetes_trials_set_the_block_on_their_environment_sidecar(tmp_path, monkeypatch):
    from environment import EnvironmentSettings
    from orchestrator.executors.kubernetes_job import (
        ENVIRONMENT_CONTAINER,
        JobOptions,
        build_job,
        load_template,
    )
    from orchestrator.executors.steps import coworker_environment

    spec = parse_experiment(
        _spec({"model": "openai/c", "api_base": "http://127.0.0.1:9/v1", "extra_args": {"max_tokens": 300}})
    ).model_copy(update={"seed": 5})
    variables = coworker_environment(spec)
    template = load_template(Path(__file__).parents[2] / "k8s" / "base" / "trial-job.yaml")
    trial = _trial_spec()
    job = build_job(
        template,
        trial,
        1,
        "file:///in.json",
        JobOptions(namespace="n", environment_env=tuple(variables.items())),
    )
    (sidecar,) = [
        c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == ENVIRONMENT_CONTAINER
    ]
    env = {item["name"]: item.get("value") for item in sidecar["env"]}
    assert {name: env[name] for name in variables} == variables
    for name, value in variables.items():  # what the sidecar's settings read from them
        monkeypatch.setenv(name, value)
    settings = EnvironmentSettings(fs_root=tmp_path / "f", apps_data_root=tmp_path / "a")
    assert (settings.coworker_model, settings.coworker_seed, settings.coworker_extra_args) == (
        "openai/c",
        5,
        {"max_tokens": 300},
    )


def _trial_spec():
    from atoll.trial import TrialSpec

    return TrialSpec(
        experiment="e",
        task_id="t",
        world_id="w",
        world_digest="d",
        agent_name="a",
        agent="replay",
        model="replay",
        run_index=0,
    )
