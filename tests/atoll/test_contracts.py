import pytest

from atoll import AtollError, CriterionVerdict, Grade, TrialSpec, Usage, Verdict, load_experiment


def _spec(**overrides) -> TrialSpec:
    fields = dict(
        experiment="exp",
        task_id="t1",
        world_id="w1",
        world_digest="abc",
        agent_name="a",
        agent="react_toolbelt",
        model="openai/gpt",
        agent_config={"temperature": 0},
        run_index=0,
    )
    fields.update(overrides)
    return TrialSpec(**fields)


def test_trial_id_is_stable_and_content_addressed():
    assert _spec().trial_id == _spec().trial_id
    assert len(_spec().trial_id) == 64
    assert _spec(run_index=1).trial_id != _spec().trial_id
    assert _spec(world_digest="other").trial_id != _spec().trial_id
    assert _spec(agent_config={"temperature": 1}).trial_id != _spec().trial_id


def test_trial_id_ignores_secrets_endpoints_and_experiment_name():
    base = _spec().trial_id
    assert _spec(agent_config={"temperature": 0, "api_key": "sk-secret"}).trial_id == base
    assert _spec(agent_config={"temperature": 0, "api_base": "http://x", "concurrency": 9}).trial_id == base
    assert _spec(experiment="renamed").trial_id == base


def test_grade_pass_score_and_ungradeable():
    verdicts = [
        CriterionVerdict(verifier_id="a", criterion="x", verdict=Verdict.met),
        CriterionVerdict(verifier_id="b", criterion="y", verdict=Verdict.not_met),
        CriterionVerdict(
            verifier_id="c",
            criterion="z",
            verdict=Verdict.ungradeable,
            ungradeable_reason="judge returned malformed output 3 times",
        ),
    ]
    grade = Grade.from_verdicts("t1", verdicts)
    assert grade.passed is False
    assert grade.score == pytest.approx(1 / 3)
    assert grade.ungradeable == 1
    assert grade.ungradeable_reasons == ["c: judge returned malformed output 3 times"]
    all_met = Grade.from_verdicts("t1", verdicts[:1])
    assert all_met.passed and all_met.score == 1.0


def test_usage_adds_up():
    total = Usage(prompt_tokens=3, cost_usd=0.5) + Usage(prompt_tokens=2, completion_tokens=1, cost_usd=0.25)
    assert (total.prompt_tokens, total.completion_tokens, total.cost_usd) == (5, 1, 0.75)


def test_experiment_errors_name_the_field(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: e\nbenchmark: b\nagents: [{name: a, model: m}, {name: a, model: n}]\nruns: 0\n")
    with pytest.raises(AtollError) as caught:
        load_experiment(path)
    assert "runs: Input should be greater than or equal to 1" in caught.value.message
    path.write_text("name: e\nbenchmark: b\nagents: [{name: a, model: m, colour: red}]\n")
    with pytest.raises(AtollError) as caught:
        load_experiment(path)
    assert "agents.0.colour: Extra inputs are not permitted" in caught.value.message
    path.write_text("name: [unclosed\n")
    with pytest.raises(AtollError, match="not valid YAML"):
        load_experiment(path)
