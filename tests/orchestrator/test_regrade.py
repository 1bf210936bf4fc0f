"""`atoll regrade`: judge recorded trials again without re-running agents."""

import asyncio
import json

import pytest

from atoll.experiment import ExperimentSpec
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.regrade import regrade_run
from orchestrator.report import build_report, leaderboard_rows, render_markdown
from orchestrator.report_html import render_html
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.viewer import trial_detail
from tests.shared_sample import fresh_sample_benchmark

MET = {"content": json.dumps({"rationale": "the deliverable states it", "verdict": "met"})}


@pytest.mark.slow
def test_regrade_with_a_judge_turns_ungradeable_into_graded_without_rerunning(tmp_path):
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    judge_only = [t["task_id"] for t in tasks if any(c.get("check") is None for c in t["rubric"])][:2]
    spec = ExperimentSpec.model_validate(
        {
            "name": "re",
            "benchmark": str(benchmark),
            "tasks": {"ids": judge_only},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
        }
    )
    first = asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    assert {r.outcome.value for _s, r, _st, _a in store.results("re")} == {"ungradeable"}
    # Artifacts sit in readable folders, each naming its trial in trial.json.
    for trial_spec, result, _state, _attempts in store.results("re"):
        folder = tmp_path / "artifacts" / "re" / trial_spec.task_id / "oracle" / "run-0" / "attempt-1"
        assert result.trajectory_uri == (folder / "trajectory.json").as_uri()
        assert json.loads((folder / "trial.json").read_text())["trial_id"] == trial_spec.trial_id
    attempts = len(store.attempt_history("re"))

    with ScriptedLLM(lambda request: MET) as judge:
        summary = asyncio.run(regrade_run(store, "re", judge_model="openai/judge", api_base=judge.api_base))
        judged = len(judge.requests)
        assert summary["trials_regraded"] == 2 and summary["outcomes_changed"] == 2 and judged > 0
        assert {r.outcome.value for _s, r, _st, _a in store.results("re")} == {"pass"}
        moved = [c for trial in summary["trials"] for c in trial["criteria"] if c["changed"]]
        assert moved and all(c["old_verdict"] == "ungradeable" and c["new_verdict"] == "met" for c in moved)
        # No agent ran again: the only new history rows are the regrade records, old results kept.
        history = store.attempt_history("re")
        assert len(history) == attempts + 2 and all(
            h["worker"].startswith("regrade") for h in history[attempts:]
        )
        assert (tmp_path / "out" / "re" / f"regrade-{summary['regraded_at']}.json").exists()
        # The new grade is stored beside the trial's other artifacts.
        for trial_spec, result, _state, _attempts in store.results("re"):
            assert (
                result.grade_uri
                == (
                    tmp_path
                    / "artifacts"
                    / "re"
                    / trial_spec.task_id
                    / "oracle"
                    / "run-0"
                    / "attempt-1"
                    / f"regrade-{summary['regraded_at']}"
                    / "grade.json"
                ).as_uri()
            )
        assert first.counts["done"] == 2

        # Regrading with the same judge again regrades nothing: every trial is already graded
        # by it (its results carry the judge's id), so no judge is called.
        again = asyncio.run(regrade_run(store, "re", judge_model="openai/judge", api_base=judge.api_base))
        assert len(judge.requests) == judged
    assert again["trials_regraded"] == 0 and again["trials_already_graded"] == 2
    assert again["outcomes_changed"] == 0
    store.dispose()


NOT_MET = {"content": json.dumps({"rationale": "I see no baseline in the answer", "verdict": "not_met"})}


@pytest.mark.slow
def test_checks_pass_is_unchanged_by_a_judge_that_says_not_met_to_everything(tmp_path):
    """Regrading with a judge changes outcomes, never "Checks pass": it counts the checks' own
    verdicts; each criterion where the judge overruled its check is a disagreement."""
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    task_id = "keystone-01-packaging-baseline"  # two criteria, both with checks, not check_only
    spec = ExperimentSpec.model_validate(
        {
            "name": "cols",
            "benchmark": str(benchmark),
            "tasks": {"ids": [task_id]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
        }
    )
    asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    [(_spec, before, _state, _attempts)] = store.results("cols")
    assert before.outcome.value == "pass" and (before.checks_met, before.checks_total) == (2, 2)
    assert before.check_disagreements == 0
    checks_before = build_report(store, "cols")["metrics"]["overall"]["oracle"]["checks_pass"]["value"]

    with ScriptedLLM(lambda request: NOT_MET) as judge:
        asyncio.run(regrade_run(store, "cols", judge_model="openai/judge", api_base=judge.api_base))
    [(_spec, after, _state, _attempts)] = store.results("cols")
    assert after.outcome.value == "fail" and (after.checks_met, after.checks_total) == (2, 2)
    assert after.check_disagreements == 2
    report = build_report(store, "cols")
    assert report["metrics"]["overall"]["oracle"]["checks_pass"]["value"] == checks_before == 1.0

    # Disagreements are counted per run and per agent, and listed with the judge's words.
    found = report["check_disagreements"]
    assert (found["count"], found["trials"], found["unreadable"]) == (2, 1, [])
    assert {row["verifier_id"] for row in found["rows"]} == {f"{task_id}-c1", f"{task_id}-c2"}
    assert all(
        row["check_verdict"] == "met"
        and row["judge_verdict"] == "not_met"
        and "I see no baseline" in row["rationale"]
        and row["trial_id"] == after.trial_id
        for row in found["rows"]
    )
    assert report["agents"]["oracle"]["check_disagreements"] == 2
    [row] = leaderboard_rows(report)
    assert row["check_disagreements"] == 2 and row["checks_pass"]["value"] == 1.0
    markdown = render_markdown(report)
    assert "| Checks pass | Disagreements |" in markdown
    listed = markdown.split("## Check/judge disagreements", 1)[1]
    assert f"{task_id}-c1" in listed and "| met | not_met | check answer_number passed" in listed
    assert "Check/judge disagreements</h2>" in render_html(report, markdown)

    # The viewer's trial data says who decided each criterion and whether check and judge agree.
    criteria = trial_detail(store, after.trial_id)["criteria"]
    assert [(c["decided_by"], c["check_verdict"], c["check_agrees"]) for c in criteria] == [
        ("judge", "met", False)
    ] * 2
    store.dispose()
