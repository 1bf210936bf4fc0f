"""The judge's contract: built from an experiment in one place, sent without secrets."""

from __future__ import annotations

import pytest

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.judge import CHECKS_ONLY, JudgeConfig, judge_request
from atoll.llm.admission import judge_from_request


def _spec(**judge) -> ExperimentSpec:
    return ExperimentSpec(
        name="e", benchmark="b", agents=[{"name": "a"}], judge=judge, concurrency={"judge": 3}
    )


def test_an_experiment_judge_carries_its_model_samples_quorum_and_concurrency():
    judge = JudgeConfig.for_experiment(_spec(model="openai/j", api_base="http://j", samples=3, quorum=2))
    assert (judge.model, judge.api_base, judge.samples, judge.quorum, judge.concurrency) == (
        "openai/j",
        "http://j",
        3,
        2,
        3,
    )
    regrade = JudgeConfig.for_experiment(_spec(model="openai/j"), model="openai/other", api_base="http://o")
    assert (regrade.model, regrade.api_base) == ("openai/other", "http://o")
    assert JudgeConfig.for_experiment(_spec()) is None


def test_the_wire_form_holds_what_was_set_and_never_a_key():
    judge = JudgeConfig(model="openai/j", samples=3, api_key="sk-secret", api_key_env="JUDGE_KEY")
    assert judge_request(judge) == {"model": "openai/j", "samples": 3}
    assert judge_request(None) == CHECKS_ONLY == {"model": None}


def test_a_request_overrides_the_default_but_keeps_its_key():
    default = JudgeConfig(model="openai/j", api_key="sk-service", timeout_s=5.0)
    merged = judge_from_request({"samples": 3, "api_key": "sk-caller", "api_key_env": "HOME"}, default)
    assert (merged.model, merged.samples, merged.timeout_s) == ("openai/j", 3, 5.0)
    assert merged.api_key.get_secret_value() == "sk-service"
    assert judge_from_request(None, default) is default
    assert judge_from_request({"model": None}, default) is None
    assert judge_from_request({"none": True}, default) is None  # the older wire form


@pytest.mark.parametrize(
    ("request_", "named"), [({"samples": 0}, "samples"), ({"temperatur": 0.1}, "temperatur"), ([1], "object")]
)
def test_a_bad_request_is_an_error_naming_the_field(request_, named):
    with pytest.raises(AtollError) as info:
        judge_from_request(request_, JudgeConfig(model="openai/j"))
    assert info.value.code == "bad_input" and named in info.value.message


def test_a_request_for_another_providers_model_does_not_get_the_services_key():
    default = JudgeConfig(model="openai/j", api_key="sk-service", api_key_env="JUDGE_KEY")
    other = judge_from_request({"model": "anthropic/claude-opus-4-5"}, default, allowed_api_bases=())
    assert (other.api_key, other.api_key_env) == (None, None)
    same = judge_from_request({"model": "openai/gpt-5"}, default, allowed_api_bases=())
    assert (same.api_key.get_secret_value(), same.api_key_env) == ("sk-service", "JUDGE_KEY")
    with pytest.raises(
        AtollError, match="field judge.model: model 'huggingface/https://evil/v1' is not a plain"
    ):
        judge_from_request({"model": "huggingface/https://evil/v1"}, default, allowed_api_bases=())
