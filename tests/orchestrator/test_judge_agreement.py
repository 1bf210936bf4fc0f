"""`atoll judge agreement` and `atoll judge self-preference` over a recorded run."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.cli import app
from orchestrator.judge_agreement import recorded_trials
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.orchestrator.judge_only import judge_only_experiment

MET = {"content": json.dumps({"rationale": "the deliverable states it", "verdict": "met"})}
NOT_MET = {"content": json.dumps({"rationale": "nothing shows it", "verdict": "not_met"})}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A run of two replay agents on one judge-graded sample task, every criterion judged met."""
    tmp_path = tmp_path_factory.mktemp("run")
    with ScriptedLLM(lambda request: MET) as judge:
        spec = judge_only_experiment(
            tmp_path,
            "judged",
            {"model": "openai/judge", "api_base": judge.api_base},
            agents=[
                {"name": "oracle", "agent": "replay", "model": "replay"},
                {"name": "oracle-2", "agent": "replay", "model": "replay"},
            ],
        )
        asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    trials, _artifacts = recorded_trials(store, "judged")
    store.dispose()
    assert len(trials) == 2
    return tmp_path, spec.store, trials


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"JUDGE_KEY": "x"})


def test_agreement_scores_the_recorded_verdicts_against_labels(recorded_run, tmp_path):
    _run_dir, store, trials = recorded_run
    rows, expected = [], {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    for trial in trials:
        for index, verdict in enumerate(trial.grade.criteria):
            recorded_met = verdict.verdict.value == "met"
            label = recorded_met if index % 2 == 0 else not recorded_met  # every other one flipped
            rows.append(
                {
                    "trial_id": trial.spec.trial_id,
                    "verifier_id": verdict.verifier_id,
                    "label": "met" if label else "not_met",
                }
            )
            cell = ("tp" if label else "fp") if recorded_met else ("fn" if label else "tn")
            expected[cell] += 1
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = invoke(
        "judge",
        "agreement",
        "judged",
        "--labels",
        str(labels),
        "--store",
        store,
        "--output",
        str(tmp_path / "a.json"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["confusion"] == expected and report["n"] == len(rows)
    flipped = sum(1 for t in trials for i, _ in enumerate(t.grade.criteria) if i % 2)
    assert report["accuracy"] == pytest.approx((len(rows) - flipped) / len(rows))
    assert len(report["disagreements"]) == flipped
    assert {d["agent"] for d in report["disagreements"]} == {"oracle", "oracle-2"}
    assert report["judges"][0]["model"] == "openai/judge" and report["missing"] == []
    assert "accuracy" in result.stdout


def test_a_label_row_the_run_lacks_is_an_error_or_counted_missing(recorded_run, tmp_path):
    _run_dir, store, trials = recorded_run
    known = trials[0]
    rows = [
        {"trial_id": known.spec.trial_id, "verifier_id": known.grade.criteria[0].verifier_id, "label": "met"},
        {"trial_id": "f" * 64, "verifier_id": "v1", "label": "met"},
        {"trial_id": known.spec.trial_id, "verifier_id": "nope", "label": "not_met"},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = invoke("judge", "agreement", "judged", "--labels", str(labels), "--store", store)
    assert isinstance(result.exception, AtollError)
    assert str(result.exception).startswith(f"{labels}:2: run 'judged' has no trial 'fff")
    result = invoke(
        "judge",
        "agreement",
        "judged",
        "--labels",
        str(labels),
        "--store",
        store,
        "--allow-missing",
        "--output",
        str(tmp_path / "a.json"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["n"] == 1 and [m["line"] for m in report["missing"]] == [2, 3]
    assert "has no criterion 'nope'" in report["missing"][1]["reason"]
    assert "2 label rows missing" in result.stdout
    unknown = invoke("judge", "agreement", "nope", "--labels", str(labels), "--store", store)
    assert isinstance(unknown.exception, AtollError) and "no run 'nope'" in str(unknown.exception)


def test_self_preference_reports_per_agent_agreement_with_a_second_judge(recorded_run, tmp_path):
    _run_dir, store, trials = recorded_run
    judged = sum(v.decided_by == "judge" for v in trials[0].grade.criteria)
    assert judged > 0
    with ScriptedLLM(lambda request: MET) as same, ScriptedLLM(lambda request: NOT_MET) as other:
        agreeing = invoke(
            "judge",
            "self-preference",
            "judged",
            "--judge-model",
            "openai/judge",
            "--api-base",
            same.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--store",
            store,
            "--output",
            str(tmp_path / "same.json"),
        )
        differing = invoke(
            "judge",
            "self-preference",
            "judged",
            "--judge-model",
            "openai/other",
            "--api-base",
            other.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--store",
            store,
            "--output",
            str(tmp_path / "other.json"),
        )
    assert agreeing.exit_code == 0, agreeing.output
    assert differing.exit_code == 0, differing.output
    same_report = json.loads((tmp_path / "same.json").read_text())
    other_report = json.loads((tmp_path / "other.json").read_text())
    assert set(same_report["agents"]) == set(other_report["agents"]) == {"oracle", "oracle-2"}
    for agent in ("oracle", "oracle-2"):
        assert same_report["agents"][agent]["agreement_rate"] == 1.0
        stats = other_report["agents"][agent]
        # Every criterion the first judge decided met, the second says not met; the criteria
        # a check decided (for both alike) are not counted as the judges' agreement.
        assert stats["confusion"] == {"tp": 0, "fp": 0, "tn": 0, "fn": judged}
        assert stats["agreement_rate"] == 0.0 and stats["n"] == judged
        assert stats["not_judged"] == len(trials[0].grade.criteria) - judged
    assert other_report["second_judge"]["model"] == "openai/other"
    assert other_report["run_judges"][0]["model"] == "openai/judge"
    assert "oracle-2" in differing.stdout


class _Interrupted(Exception):
    pass


@pytest.mark.slow
def test_a_regrade_under_way_never_mixes_two_judges_in_the_agreement(tmp_path, monkeypatch):
    from orchestrator.regrade import regrade_run

    def verdicts(request: dict) -> dict:  # judge A: every criterion met; judge B: none
        return NOT_MET if "judge-b" in str(request.get("model")) else MET

    with ScriptedLLM(verdicts) as judge:
        spec = judge_only_experiment(
            tmp_path,
            "mixed",
            {"model": "openai/judge-a", "api_base": judge.api_base},
            agents=[
                {"name": "oracle", "agent": "replay", "model": "replay"},
                {"name": "oracle-2", "agent": "replay", "model": "replay"},
            ],
        )
        asyncio.run(run_experiment(spec, quiet=True))
        store = TrialStore(spec.store)
        trials, _artifacts = recorded_trials(store, "mixed")
        # Judge B's regrade stops after one trial is written: the other keeps judge A's grade.
        real, written = store.replace_result, []

        def stop_after_one(experiment, trial_id, *args, **kwargs):
            if written:
                raise _Interrupted
            written.append(trial_id)
            return real(experiment, trial_id, *args, **kwargs)

        monkeypatch.setattr(store, "replace_result", stop_after_one)
        with pytest.raises(_Interrupted):
            asyncio.run(regrade_run(store, "mixed", judge_model="openai/judge-b", api_base=judge.api_base))
        monkeypatch.undo()
        store.dispose()
    # Every criterion labelled met: judge A's grades would agree, judge B's disagree.
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "\n".join(
            json.dumps({"trial_id": t.spec.trial_id, "verifier_id": v.verifier_id, "label": "met"})
            for t in trials
            for v in t.grade.criteria
        )
        + "\n"
    )
    stale = next(t for t in trials if t.spec.trial_id not in written)
    refused = invoke("judge", "agreement", "mixed", "--labels", str(labels), "--store", spec.store)
    assert isinstance(refused.exception, AtollError)
    assert f"trial {stale.spec.trial_id!r} is graded by judge openai/judge-a" in str(refused.exception)
    assert "`atoll regrade mixed` finishes the regrade" in str(refused.exception)
    result = invoke(
        "judge",
        "agreement",
        "mixed",
        "--labels",
        str(labels),
        "--store",
        spec.store,
        "--allow-missing",
        "--output",
        str(tmp_path / "a.json"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "a.json").read_text())
    # Only judge B's trial counts; judge A's rows are missing, with the reason.
    assert [j["model"] for j in report["judges"]] == ["openai/judge-b"]
    assert {m["trial_id"] for m in report["missing"]} == {stale.spec.trial_id}
    regraded = next(t for t in trials if t.spec.trial_id == written[0])
    assert report["n"] + report["ungradeable"] == len(regraded.grade.criteria)
    assert report["confusion"]["tp"] < report["n"]  # judge B said not met where A said met


@pytest.mark.slow
def test_self_preference_compares_only_what_the_judge_decided(tmp_path):
    """An agent that does nothing fails its checks: both judges' grades say not met there
    without either judge deciding it, which is no agreement between judges."""

    def endpoint(request: dict) -> dict:
        model = str(request.get("model"))
        if "lazy" in model:  # the agent: answers at once, touches nothing
            return {"content": "Done."}
        return NOT_MET if "other" in model else MET

    with ScriptedLLM(endpoint) as server:
        spec = judge_only_experiment(
            tmp_path,
            "lazy",
            {"model": "openai/judge", "api_base": server.api_base},
            agents=[{"name": "lazy", "agent": "loop", "model": "openai/lazy", "api_base": server.api_base}],
        )
        asyncio.run(run_experiment(spec, quiet=True))
        store = TrialStore(spec.store)
        [trial], _artifacts = recorded_trials(store, "lazy")
        store.dispose()
        by_check = sum(v.decided_by != "judge" for v in trial.grade.criteria)
        by_judge = sum(
            v.decided_by == "judge" and v.verdict.value != "ungradeable" for v in trial.grade.criteria
        )
        assert by_check > 0 and by_judge > 0
        result = invoke(
            "judge",
            "self-preference",
            "lazy",
            "--judge-model",
            "openai/other",
            "--api-base",
            server.api_base,
            "--api-key-env",
            "JUDGE_KEY",
            "--store",
            spec.store,
            "--output",
            str(tmp_path / "sp.json"),
        )
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "sp.json").read_text())["agents"]["lazy"]
    # Before: the check-decided criteria counted as agreement (tn), agreement_rate above 0.
    assert stats["not_judged"] == by_check and stats["n"] == by_judge
    assert stats["agreement_rate"] == 0.0 and stats["confusion"]["tn"] == 0
