"""``atoll regrade RUN``: judge recorded trials again without re-running any agent.

A regrade is a new grading of the run, with provenance. It first records the run's new judge
(the experiment's, or ``--judge-model``/``--api-base``): the identity document and fingerprint
and the stored spec's judge (:mod:`orchestrator.judging`), so the run's report from then on
counts only this judge's verdicts and ``atoll run`` of the experiment updated to this judge
resumes the run instead of refusing it. Then, for every finished trial with stored artifacts
that this judge has not graded yet (so an interrupted regrade resumes where it stopped), the
grader grades the stored trajectory and snapshots again, the new grade is stored next to the
old one, the trial's result is updated (with the new judge's id), and a provenance file lists
every verdict that moved. With the verdict cache, unchanged evidence costs no judge call.
Trials never graded (a run that ended early, unless the experiment grades those) stay so.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from atoll.errors import AtollError, ErrorCode
from atoll.extras import require_extra
from atoll.grade import Grade
from atoll.jsonio import dumps_strict, model_json
from atoll.judge import JudgeIdentity, judge_identity
from atoll.llm.profiles import experiment_judge
from atoll.loader import load_benchmark
from atoll.trajectory import Trajectory
from atoll.trial import Outcome, TrialResult, TrialSpec, TrialState
from orchestrator.artifacts import ArtifactStore, stored_snapshots, trial_prefix
from orchestrator.executors.local import trial_outcome
from orchestrator.executors.steps import check_columns, should_grade
from orchestrator.fingerprint import fingerprint
from orchestrator.judging import JUDGES_KEY, known_judges
from orchestrator.policy import stored_spec
from orchestrator.store import TrialStore


async def regrade_run(
    store: TrialStore,
    experiment: str,
    *,
    judge_model: str | None = None,
    api_base: str | None = None,
    output_dir: Path | None = None,
) -> dict[str, Any]:
    """Record ``experiment``'s judge (the stored experiment's, ``judge_model``/``api_base``
    overriding it), then regrade every finished trial that judge has not graded, or graded
    with ungradeable criteria; returns the provenance summary. Raises AtollError(unknown_run) for a run the store does not hold, and
    AtollError(bad_input) for a judge model that refuses the experiment's judge settings."""
    require_extra("formats", "atoll regrade")
    from grader import VerdictCache, regrade

    raw = store.experiment_spec(experiment)
    if raw is None:
        raise AtollError(ErrorCode.unknown_run, f"no run {experiment!r} in {store.url}")
    spec = stored_spec(raw)  # the stored spec also carries report-only keys
    benchmark = load_benchmark(spec.benchmark)
    tasks = {task.task_id: task for task in benchmark.tasks}
    artifacts = ArtifactStore(spec.artifacts)
    judge = experiment_judge(spec, model=judge_model, api_base=api_base)
    identity = judge_identity(judge)
    _record_judge(store, experiment, raw, identity, judge_model=judge_model, api_base=api_base)
    output = output_dir or Path(spec.output_dir) / experiment
    cache = VerdictCache(Path(spec.output_dir) / ".cache" / "verdicts.sqlite")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    movements: list[dict[str, Any]] = []
    regraded = already = 0
    for trial_spec, result, state, _attempts in store.results(experiment):
        if (
            result is None
            or state is not TrialState.done
            or not (result.trajectory_uri and result.snapshot_before_uri and result.snapshot_after_uri)
        ):
            continue
        if result.judge_id == identity.id and not result.criteria_ungradeable:
            # Graded by this judge already (an interrupted regrade resumes here). A grade of
            # it with ungradeable criteria is judged again: a judge that failed (an endpoint
            # down part-way) must not leave the trial ungradeable for good; its decided
            # verdicts come from the verdict cache.
            already += 1
            continue
        task = tasks.get(trial_spec.task_id)
        if task is None:
            continue
        with stored_snapshots(artifacts, result.snapshot_before_uri, result.snapshot_after_uri) as (
            before,
            after,
        ):
            trajectory = Trajectory.model_validate_json(artifacts.get_bytes(result.trajectory_uri))
            if not should_grade(trajectory, spec.limits.grade_incomplete):
                continue  # never graded: its outcome is no judge's
            old = (
                Grade.model_validate_json(artifacts.get_bytes(result.grade_uri)) if result.grade_uri else None
            )
            grade, provenance = await regrade(task, before, after, trajectory, old, judge, cache)
        grade_uri = artifacts.put_bytes(
            f"{_trial_folder(artifacts, trial_spec, result)}/regrade-{stamp}/grade.json",
            model_json(grade, indent=2).encode(),
        )
        outcome = (
            result.outcome if result.outcome is Outcome.infra_error else trial_outcome(trajectory, grade)
        )
        updated = result.model_copy(
            update={
                "outcome": outcome,
                "score": grade.score,
                "grade_uri": grade_uri,
                "judge_id": grade.judge.id if grade.judge is not None else identity.id,
                "judge_cost_usd": result.judge_cost_usd + grade.judge_cost_usd,
                "judge_prompt_tokens": result.judge_prompt_tokens + grade.judge_prompt_tokens,
                "judge_completion_tokens": result.judge_completion_tokens + grade.judge_completion_tokens,
                "judge_reasoning_tokens": result.judge_reasoning_tokens + grade.judge_reasoning_tokens,
                "judge_cached_tokens": result.judge_cached_tokens + grade.judge_cached_tokens,
                **check_columns(task, grade),
                "criteria_total": len(grade.criteria),
                "criteria_ungradeable": grade.ungradeable,
            }
        )
        await asyncio.to_thread(
            store.replace_result, experiment, trial_spec.trial_id, updated, note=f"regrade {stamp}"
        )
        regraded += 1
        movements.append(
            {
                **provenance.model_dump(mode="json"),
                "old_outcome": result.outcome.value,
                "new_outcome": outcome.value,
                "grade_uri": grade_uri,
            }
        )
    summary = {
        "experiment": experiment,
        "regraded_at": stamp,
        "judge_model": judge.model if judge else None,
        "judge": {"id": identity.id, "describe": identity.describe(), **identity.model_dump(mode="json")},
        "trials_regraded": regraded,
        "trials_already_graded": already,
        "outcomes_changed": sum(m["old_outcome"] != m["new_outcome"] for m in movements),
        "verdicts_changed": sum(m["changed"] for m in movements),
        "cache_hits": cache.hits,
        "trials": movements,
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / f"regrade-{stamp}.json").write_text(dumps_strict(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _record_judge(
    store: TrialStore,
    experiment: str,
    raw: dict[str, Any],
    identity: JudgeIdentity,
    *,
    judge_model: str | None,
    api_base: str | None,
) -> None:
    """Make ``identity`` the run's judge: in its identity document (a run recorded before runs
    had one gets a document naming only the judge) and fingerprint, and in the stored spec's
    judge model and endpoint (a new endpoint's secret is not carried over, as
    :func:`atoll.llm.profiles.experiment_judge` does), keeping why the run last stopped."""
    record = store.run_record(experiment)
    document = dict(record.identity) if record is not None and record.identity else {}
    document["judge"] = identity.model_dump(mode="json")
    judge_section = dict(raw.get("judge") or {})
    if judge_model:
        judge_section["model"] = judge_model
    if api_base:
        judge_section.update(api_base=api_base, api_key_secret=None)
    updated = {**raw, "judge": judge_section, JUDGES_KEY: known_judges(record, identity)}
    stored_spec(updated)  # still a valid experiment
    store.save_experiment(
        experiment, updated, fingerprint=fingerprint(document), identity=document, keep_stop=True
    )


def _trial_folder(artifacts: ArtifactStore, spec: TrialSpec, result: TrialResult) -> str:
    """The folder the trial's recorded trajectory is in (either layout, read from the URI the
    store holds), or its readable folder when that URI lies outside this artifact store."""
    key = artifacts.key_of(result.trajectory_uri or "")
    return key.rsplit("/", 1)[0] if key and "/" in key else trial_prefix(spec, result.attempt)
