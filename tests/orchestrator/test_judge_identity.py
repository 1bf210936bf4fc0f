"""The judge is part of a run's identity: a run re-run with another judge is refused naming the
change, a regrade records the new judge and reports never count two judges' verdicts as one,
and reports and the viewer name the judge whose verdicts they show."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.calibrations import record_calibration
from orchestrator.judging import spec_judge
from orchestrator.regrade import regrade_run
from orchestrator.report import build_report, render_markdown, write_report
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app
from orchestrator.viewer.data import run_detail, run_trials
from orchestrator.viewer.trial import trial_detail
from tests.served_app import ServedApp
from tests.shared_sample import fresh_sample_benchmark

JUDGE_A, JUDGE_B = "openai/judge-a", "openai/judge-b"


def _verdicts(request: dict) -> dict:
    """Judge A finds every criterion met, judge B none."""
    verdict = "not_met" if "judge-b" in str(request.get("model")) else "met"
    return {"content": json.dumps({"rationale": f"judge says {verdict}", "verdict": verdict})}


def _experiment(tmp_path: Path, judge: dict, **settings) -> ExperimentSpec:
    """Run ``jr``: the replay oracle on two sample tasks that only a judge can fully grade."""
    benchmark = tmp_path / "bench"
    if not benchmark.exists():
        fresh_sample_benchmark(benchmark)
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    judged = [t["task_id"] for t in tasks if any(c.get("check") is None for c in t["rubric"])][:2]
    return ExperimentSpec.model_validate(
        {
            "name": "jr",
            "benchmark": str(benchmark),
            "tasks": {"ids": judged},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "judge": judge,
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            **settings,
        }
    )


class _Interrupted(Exception):
    pass


@pytest.mark.slow
def test_a_run_rerun_with_another_judge_is_refused_naming_the_change(tmp_path):
    with ScriptedLLM(_verdicts) as server:
        spec = _experiment(tmp_path, {"model": JUDGE_A, "api_base": server.api_base})
        asyncio.run(run_experiment(spec, quiet=True))
        store = TrialStore(spec.store)
        identity = spec_judge(spec)
        # Every result records the judge whose grading it counts.
        assert {r.judge_id for _s, r, _st, _a in store.results("jr")} == {identity.id}
        calls = len(server.requests)

        other = _experiment(tmp_path, {"model": JUDGE_B, "api_base": server.api_base})
        with pytest.raises(AtollError) as refused:
            asyncio.run(run_experiment(other, quiet=True))
        message = refused.value.message
        assert refused.value.code == "fingerprint_changed"
        assert f"judge: {identity.describe()} → {spec_judge(other).describe()}" in message
        assert f"atoll regrade jr --judge-model {JUDGE_B} --api-base {server.api_base}" in message
        assert "--new-run NAME" in message
        assert len(server.requests) == calls  # nothing judged

        # Another parameter than the model: a regrade (which overrides only the model and the
        # endpoint) cannot reach it, so the way out is to record the new judge, then regrade.
        sampled = _experiment(tmp_path, {"model": JUDGE_A, "api_base": server.api_base, "samples": 3})
        with pytest.raises(AtollError) as refused:
            asyncio.run(run_experiment(sampled, quiet=True))
        assert "3 samples quorum 3" in refused.value.message
        assert "with --replace, then `atoll regrade jr`" in refused.value.message

        # The same judge elsewhere, with other concurrency: not another judge, the run resumes.
        moved = _experiment(
            tmp_path, {"model": JUDGE_A, "api_base": "http://127.0.0.1:9/v1"}, concurrency={"judge": 2}
        )
        resumed = asyncio.run(run_experiment(moved, quiet=True))
        assert resumed.newly_enqueued == 0 and resumed.counts["done"] == 2
    store.dispose()


@pytest.mark.slow
def test_an_interrupted_regrade_never_reports_two_judges_as_one_and_a_second_one_finishes_it(
    tmp_path, monkeypatch
):
    with ScriptedLLM(_verdicts) as server:
        spec = _experiment(tmp_path, {"model": JUDGE_A, "api_base": server.api_base})
        asyncio.run(run_experiment(spec, quiet=True))
        store = TrialStore(spec.store)
        judge_a = spec_judge(spec)
        first = build_report(store, "jr")
        assert first["judge"]["id"] == judge_a.id and first["judge"]["model"] == JUDGE_A
        assert first["judge"]["gradings"]["counted"] == 2
        assert first["metrics"]["overall"]["oracle"]["trials_graded"] == 2

        # The regrade under judge B stops after one trial is written.
        real = store.replace_result
        written: list[str] = []

        def stop_after_one(experiment, trial_id, *args, **kwargs):
            if written:
                raise _Interrupted
            written.append(trial_id)
            return real(experiment, trial_id, *args, **kwargs)

        monkeypatch.setattr(store, "replace_result", stop_after_one)
        with pytest.raises(_Interrupted):
            asyncio.run(regrade_run(store, "jr", judge_model=JUDGE_B, api_base=server.api_base))
        monkeypatch.undo()

        judge_b = spec_judge(_experiment(tmp_path, {"model": JUDGE_B, "api_base": server.api_base}))
        report = build_report(store, "jr")
        assert report["judge"]["id"] == judge_b.id and report["judge"]["describe"] == judge_b.describe()
        # Only judge B's verdict counts; judge A's is left out, with count and reason.
        assert report["metrics"]["overall"]["oracle"]["trials_graded"] == 1
        assert report["judge"]["gradings"]["counted"] == 1
        (left_out,) = report["judge"]["gradings"]["other_judges"]
        reason = (
            f"graded by judge {judge_a.describe()}, not the run's judge {judge_b.describe()}; "
            "`atoll regrade jr` finishes the regrade"
        )
        assert left_out["trials"] == 1 and left_out["reason"] == reason
        assert report["agents"]["oracle"]["exclusion_reasons"] == {reason: 1}
        rows = {row["trial_id"]: row for row in report["trial_rows"]}
        assert rows[written[0]]["left_out"] is None and rows[written[0]]["outcome"] == "fail"
        (stale,) = [row for row in rows.values() if row["left_out"]]
        assert stale["judge_id"] == judge_a.id
        assert sum(cell["graded"] for cell in report["matrix"]["cells"]["oracle"].values()) == 1
        [headline] = report["headline"]  # the trial left out is not graded for this judge
        assert (headline["passes"], headline["graded"]) == (0, 1) and "(0 of 1 graded)" in headline["line"]
        markdown = render_markdown(report)
        assert f"**Judge:** `{judge_b.describe()}` (id `{judge_b.id}`) · uncalibrated" in markdown
        assert f"Left out: 1 trial(s) {reason}" in markdown
        # atoll run / atoll regrade would exit 4 naming the unfinished regrade.
        from atoll_cli.commands.completeness import incomplete_line, report_incomplete

        assert report_incomplete(report) == (0, 0, 1, 0)
        assert incomplete_line("run jr", *report_incomplete(report)) == (
            "run jr: incomplete: 1 trial is graded by another judge than the run's (an unfinished regrade)"
        )

        # The viewer labels the run with its recorded judge and what is left out, the trial
        # graded by judge A with its own judge.
        detail = run_detail(store, "jr")
        assert detail["judge"]["label"].startswith(judge_b.describe())
        assert "1 trial(s) graded by another judge left out" in detail["judge"]["label"]
        table = {row["trial_id"]: row for row in run_trials(store, "jr")}
        assert table[stale["trial_id"]]["left_out"] == reason
        assert detail["matrix"]["cells"]["oracle"][stale["task_id"]]["graded"] == 0
        old = trial_detail(store, stale["trial_id"], run="jr")
        assert old["judge"]["same"] is False and old["judge"]["grading"]["describe"] == judge_a.describe()
        assert old["judge"]["run"]["id"] == judge_b.id
        assert {c["judge_model"] for c in old["criteria"] if c["decided_by"] == "judge"} == {JUDGE_A}
        assert trial_detail(store, written[0], run="jr")["judge"]["same"] is True
        with ServedApp(create_app(store, bind_host="127.0.0.1")) as viewer:
            shown = httpx.get(f"{viewer.url}/api/runs/jr").json()
        assert shown["judge"]["id"] == judge_b.id and shown["judge"]["model"] == JUDGE_B

        # A second regrade (the run's judge is B now) finishes it: only the trial B has not graded.
        finished = asyncio.run(regrade_run(store, "jr"))
        assert finished["trials_regraded"] == 1 and finished["trials_already_graded"] == 1
        assert {r.judge_id for _s, r, _st, _a in store.results("jr")} == {judge_b.id}
        # A calibration of judge B (atoll judge calibrate's record) is what the report says of it.
        record_calibration(
            store, {"judge": {"id": judge_b.id, "model": JUDGE_B}, "n": 747, "accuracy": 0.985}
        )
        paths = write_report(store, "jr", tmp_path / "report")
        done = json.loads(paths["json"].read_text())
        assert done["judge"]["calibration"].startswith("judge calibrated: accuracy 0.985 on 747 labels (")
        assert done["judge"]["calibration"] in paths["md"].read_text()
        assert run_detail(store, "jr")["judge"]["calibration"] == done["judge"]["calibration"]
        assert done["judge"]["gradings"] == {
            "counted": 2,
            "not_recorded": 0,
            "other_judges": [],
            "judges_seen": [],
        }
        assert done["metrics"]["overall"]["oracle"]["trials_graded"] == 2
        assert {row["outcome"] for row in done["trial_rows"]} == {"fail"}
        assert judge_b.describe() in paths["html"].read_text()

        # The experiment updated to judge B resumes the run instead of refusing it.
        resumed = asyncio.run(
            run_experiment(_experiment(tmp_path, {"model": JUDGE_B, "api_base": server.api_base}), quiet=True)
        )
        assert resumed.newly_enqueued == 0
    store.dispose()


@pytest.mark.slow
def test_a_run_recorded_without_a_judge_is_not_refused_and_counts_its_gradings_as_not_recorded(tmp_path):
    spec = _experiment(tmp_path, {"model": JUDGE_A}, executor="instant")
    asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    # As a store written before runs recorded a judge: no judge in the identity, none in results.
    record = store.run_record("jr")
    old_identity = {key: value for key, value in record.identity.items() if key != "judge"}
    store.save_experiment("jr", record.spec, fingerprint="0" * 64, identity=old_identity)
    spec_row, result, _state, _attempts = next(iter(store.results("jr")))
    store.replace_result(
        "jr",
        spec_row.trial_id,
        result.model_copy(update={"grade_uri": "file:///old/grade.json"}),
        note="old store",
    )
    assert build_report(store, "jr")["judge"]["describe"] == "judge not recorded"

    other = _experiment(tmp_path, {"model": JUDGE_B}, executor="instant")
    asyncio.run(run_experiment(other, quiet=True))  # not refused: the judge is recorded from now on
    report = build_report(store, "jr")
    assert report["judge"]["id"] == spec_judge(other).id
    assert report["judge"]["gradings"]["not_recorded"] == 1
    assert report["metrics"]["overall"]["oracle"]["trials_graded"] == 2  # counted as before
    assert "1 graded trial(s): judge not recorded" in render_markdown(report)
    store.dispose()


@pytest.mark.parametrize("graded_by", [JUDGE_A, None])
def test_a_result_records_the_judge_of_the_grade_it_counts_and_none_when_never_graded(graded_by):
    # build_result is where every executor (in-process grading, the grading service, a
    # Kubernetes trial pod) makes a trial's result from its grade.
    from atoll.benchmark import Task
    from atoll.grade import CriterionVerdict, Grade, Verdict
    from atoll.judge import JudgeConfig, judge_identity
    from atoll.trajectory import RunStatus, Trajectory
    from atoll.trial import TrialSpec
    from orchestrator.executors.steps import build_result

    task = Task.model_validate(
        {"task_id": "t", "world_id": "w", "prompt": "p", "rubric": [{"verifier_id": "t-1", "criteria": "c"}]}
    )
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
    identity = judge_identity(JudgeConfig(model=graded_by) if graded_by else None)
    grade = Grade.from_verdicts(
        "t", [CriterionVerdict(verifier_id="t-1", criterion="c", verdict=Verdict.met)], judge=identity
    )
    now = datetime.now(UTC)
    trajectory = Trajectory(
        agent="replay", model="m", status=RunStatus.completed, started_at=now, ended_at=now
    )
    result = build_result(spec, task, trajectory, grade, attempt=1, duration_s=0.0, uris={})
    assert result.judge_id == identity.id
    ungraded = build_result(spec, task, trajectory, None, attempt=1, duration_s=0.0, uris={})
    assert ungraded.judge_id is None
