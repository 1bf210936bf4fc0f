"""Experiments carry no keys and no routing: an inline key or a litellm argument that could
move a call is refused when the experiment is loaded, naming the field; a submitter's own key
is only ever a secret's name, which never enters a trial's identity (DESIGN §6)."""

from __future__ import annotations

import pytest
import yaml

from atoll.errors import AtollError
from atoll.experiment_file import parse_experiment
from atoll.trial import TrialSpec


def experiment(agent: dict | None = None, judge: dict | None = None) -> str:
    spec = {
        "name": "e",
        "benchmark": "bench",
        "agents": [{"name": "a", "model": "openai/gpt-5", **(agent or {})}],
        "judge": {"model": "openai/judge", **(judge or {})},
    }
    return yaml.safe_dump(spec)


@pytest.mark.parametrize(
    "agent, judge, field",
    [
        ({"extra_args": {"api_key": "sk-inline"}}, None, "agents[0].extra_args.api_key"),
        ({"config": {"api_key": "sk-inline"}}, None, "agents[0].config.api_key"),
        ({"config": {"extra_args": {"aws_secret_access_key": "x"}}}, None, "agents[0].config.extra_args."),
        (
            {"extra_args": {"extra_body": {"auth": {"token": "x"}}}},
            None,
            "agents[0].extra_args.extra_body.auth.token",
        ),
        (
            {"extra_args": {"fallbacks": [{"api_base": "http://evil"}]}},
            None,
            "agents[0].extra_args.fallbacks",
        ),
        ({"extra_args": {"base_url": "http://evil"}}, None, "agents[0].extra_args.base_url"),
        (
            {"config": {"extra_args": {"extra_headers": {}}}},
            None,
            "agents[0].config.extra_args.extra_headers",
        ),
        (None, {"extra_args": {"fallbacks": [{"api_base": "http://evil"}]}}, "judge.extra_args.fallbacks"),
        (None, {"extra_args": {"api_key": "sk-inline"}}, "judge.extra_args.api_key"),
        (None, {"extra_args": {"proxy": "http://evil"}}, "judge.extra_args.proxy"),
    ],
)
def test_keys_and_routing_arguments_are_refused_at_load_naming_the_field(agent, judge, field):
    with pytest.raises(AtollError) as raised:
        parse_experiment(experiment(agent, judge), source="exp.yaml")
    assert raised.value.code == "bad_experiment"
    assert raised.value.message.startswith(f"exp.yaml: {field}")
    if "key" in field or "token" in field:
        assert "api_key_secret" in raised.value.message  # points to the secret-reference form
    assert "sk-inline" not in raised.value.message


def test_generation_parameters_and_secret_references_load():
    spec = parse_experiment(
        experiment(
            {"api_key_secret": "TEAM_A", "extra_args": {"temperature": 1, "reasoning_effort": "high"}},
            {
                "api_key_secret": "TEAM_A",
                "extra_args": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            },
        )
    )
    assert spec.agents[0].api_key_secret == "TEAM_A" and spec.judge.api_key_secret == "TEAM_A"
    config = {"max_tokens": 5, "token_budget": 9, "max_completion_tokens": 3}  # not keys
    assert parse_experiment(experiment({"config": config})).agents[0].config == config


def test_a_secrets_name_and_the_endpoint_are_not_part_of_a_trials_identity():
    common = dict(
        experiment="e", task_id="t", world_id="w", world_digest="d", agent_name="a", agent="x", model="m"
    )
    plain = TrialSpec(**common, agent_config={"max_steps": 5}, run_index=0)
    with_secret = TrialSpec(
        **common,
        agent_config={"max_steps": 5, "api_key_secret": "TEAM_A", "api_base": "http://x"},
        run_index=0,
    )
    assert plain.trial_id == with_secret.trial_id
