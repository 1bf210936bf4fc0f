"""A run's recorded verdicts against references: human labels (``atoll judge agreement``)
and a second judge (``atoll judge self-preference``), with the statistics of
:mod:`grader.calibration`.

Labels for a run are JSONL rows ``{"trial_id", "verifier_id", "label": "met" | "not_met"}``.
A row naming a trial the run does not have, a trial with no recorded grade, or a criterion
its grade does not hold is an error naming ``file:line``, unless the caller allows missing
rows: then each is counted under ``missing`` with why, and left out of the statistics.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atoll.errors import AtollError, ErrorCode
from atoll.extras import require_extra
from atoll.grade import CriterionVerdict, Grade, Verdict
from atoll.judge import JudgeConfig, JudgeIdentity
from atoll.trajectory import Trajectory
from atoll.trial import TrialResult, TrialSpec, TrialState
from grader.calibrate import file_digest, parse_label, read_jsonl
from grader.calibration import DEFAULT_SEED, RESAMPLES, agreement, summary
from orchestrator.artifacts import ArtifactStore, stored_snapshots
from orchestrator.judging import judged_elsewhere
from orchestrator.policy import stored_spec
from orchestrator.stats import mcnemar_exact
from orchestrator.store import TrialStore


@dataclass(frozen=True)
class RecordedTrial:
    """A finished trial of a run with its recorded grade."""

    spec: TrialSpec
    result: TrialResult
    grade: Grade


def judged_by_another(store: TrialStore, run: str) -> dict[str, str]:
    """Trial id → why it is left out, for the run's finished trials graded by another judge
    than the run's (a regrade under way), as reports leave them out
    (:func:`orchestrator.judging.other_judge`)."""
    elsewhere = judged_elsewhere(store.run_record(run), run)
    return {
        spec.trial_id: reason
        for spec, result, state, _attempts in store.results(run)
        if result is not None and state is TrialState.done and (reason := elsewhere(result)) is not None
    }


def recorded_trials(store: TrialStore, run: str) -> tuple[list[RecordedTrial], ArtifactStore]:
    """The run's finished trials that have a recorded grade by the run's judge (each trial's
    current grade, after any regrade; one graded by another judge, a regrade under way, is
    left out as reports leave it out, so two judges' verdicts are never counted as one), and
    the artifact store they are in. Raises AtollError("unknown_run")."""
    raw = store.experiment_spec(run)
    if raw is None:
        raise AtollError(ErrorCode.unknown_run, f"no run {run!r} in {store.display_url}")
    artifacts = ArtifactStore(stored_spec(raw).artifacts)
    elsewhere = judged_elsewhere(store.run_record(run), run)
    trials = []
    for spec, result, state, _attempts in store.results(run):
        if (
            result is None
            or state is not TrialState.done
            or not result.grade_uri
            or elsewhere(result) is not None
        ):
            continue
        grade = Grade.model_validate_json(artifacts.get_bytes(result.grade_uri))
        trials.append(RecordedTrial(spec, result, grade))
    return trials, artifacts


def _judges(trials: list[RecordedTrial]) -> list[dict[str, Any]]:
    """The identities that decided the run's grades (more than one after a partial regrade)."""
    seen: dict[str, JudgeIdentity] = {}
    for trial in trials:
        if trial.grade.judge is not None:
            seen.setdefault(trial.grade.judge.id, trial.grade.judge)
    return [
        {**identity.model_dump(mode="json"), "id": key, "describe": identity.describe()}
        for key, identity in seen.items()
    ]


def run_agreement(
    store: TrialStore,
    run: str,
    labels: Path,
    *,
    allow_missing: bool = False,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """The statistics of the verdicts ``run`` recorded against the human labels in ``labels``
    (rows keyed by ``trial_id`` + ``verifier_id``; see the module). Raises
    AtollError(bad_input) naming ``labels:line`` for a bad row, and for an unknown trial or
    criterion unless ``allow_missing``."""
    trials, _artifacts = recorded_trials(store, run)
    known = {spec.trial_id for spec, *_ in store.results(run)}
    verdicts = {
        (trial.spec.trial_id, verdict.verifier_id): (trial, verdict)
        for trial in trials
        for verdict in trial.grade.criteria
    }
    graded = {trial.spec.trial_id for trial in trials}
    left_out = judged_by_another(store, run)
    pairs: list[tuple[Verdict, bool]] = []
    domains: list[str] = []
    judged: list[tuple[int, RecordedTrial, CriterionVerdict, bool]] = []
    missing: list[dict[str, Any]] = []
    for number, record in read_jsonl(labels):
        where = f"{labels}:{number}"
        trial_id, verifier_id = record.get("trial_id"), record.get("verifier_id")
        if not isinstance(trial_id, str) or not isinstance(verifier_id, str):
            raise AtollError(ErrorCode.bad_input, f"{where}: needs 'trial_id' and 'verifier_id' (strings)")
        if "label" not in record:
            raise AtollError(ErrorCode.bad_input, f'{where}: needs \'label\' ("met" or "not_met")')
        label = parse_label(record["label"], where)
        found = verdicts.get((trial_id, verifier_id))
        if found is None:
            if trial_id not in known:
                reason = f"run {run!r} has no trial {trial_id!r}"
            elif trial_id in left_out:
                reason = f"trial {trial_id!r} is {left_out[trial_id]}"
            elif trial_id not in graded:
                reason = f"trial {trial_id!r} has no recorded grade"
            else:
                reason = f"the grade of trial {trial_id!r} has no criterion {verifier_id!r}"
            if not allow_missing:
                raise AtollError(
                    ErrorCode.bad_input, f"{where}: {reason} (--allow-missing counts such rows apart)"
                )
            missing.append(
                {"line": number, "trial_id": trial_id, "verifier_id": verifier_id, "reason": reason}
            )
            continue
        trial, verdict = found
        pairs.append((verdict.verdict, label))
        domains.append(trial.spec.domain)
        judged.append((number, trial, verdict, label))
    report: dict[str, Any] = {
        "run": run,
        "judges": _judges(trials),
        "labels": str(labels),
        "labels_sha256": file_digest(labels),
        **summary(pairs, domains, seed=seed, resamples=resamples),
        "missing": missing,
    }
    report["disagreements"] = [
        {
            "line": number,
            "trial_id": trial.spec.trial_id,
            "task_id": trial.spec.task_id,
            "agent": trial.spec.agent_name,
            "verifier_id": verdict.verifier_id,
            "label": "met" if label else "not_met",
            "verdict": verdict.verdict.value,
            "decided_by": verdict.decided_by,
            "rationale": verdict.ungradeable_reason or verdict.rationale,
        }
        for number, trial, verdict, label in judged
        if verdict.verdict is not Verdict.ungradeable and (verdict.verdict is Verdict.met) != label
    ]
    report["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return report


async def self_preference(
    store: TrialStore,
    run: str,
    second: JudgeConfig,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
    on_trial: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Per agent of ``run``: how far the run's recorded verdicts agree with ``second``'s on
    that agent's trials (the recorded verdict is the reference, the second judge's the
    judged one). Every trial with a recorded grade and stored artifacts is graded again by
    ``second``; nothing is stored. Trials graded by another judge than the run's are left out
    (``trials_left_out``, with why). Only criteria the run's judge decided are compared:
    those a check or a rule decided are left out (counted under ``not_judged``), and so are
    those the judge left ungradeable in the run (``recorded_ungradeable``); ungradeable second verdicts are counted as the
    statistics count them. Raises AtollError("unknown_run") and AtollError("model_endpoint")."""
    from atoll.loader import load_benchmark

    require_extra("formats", "judge agreement")
    from grader.grading import grade_trial

    trials, artifacts = recorded_trials(store, run)
    left_out = judged_by_another(store, run)
    raw = store.experiment_spec(run)
    assert raw is not None
    tasks = {task.task_id: task for task in load_benchmark(stored_spec(raw).benchmark).tasks}
    per_agent: dict[str, list[tuple[Verdict, bool]]] = {}
    recorded_ungradeable: dict[str, int] = {}
    not_judged: dict[str, int] = {}
    skipped = 0
    for trial in trials:
        task = tasks.get(trial.spec.task_id)
        result = trial.result
        if task is None or not (
            result.trajectory_uri and result.snapshot_before_uri and result.snapshot_after_uri
        ):
            skipped += 1
            continue
        with stored_snapshots(artifacts, result.snapshot_before_uri, result.snapshot_after_uri) as (
            before,
            after,
        ):
            trajectory = Trajectory.model_validate_json(artifacts.get_bytes(result.trajectory_uri))
            grade = await grade_trial(task, before, after, trajectory, second, trial_id=trial.spec.trial_id)
        theirs = {v.verifier_id: v.verdict for v in grade.criteria}
        agent = trial.spec.agent_name
        rows = per_agent.setdefault(agent, [])
        for verdict in trial.grade.criteria:
            if verdict.decided_by != "judge":
                # A check or a rule decided it, as it decides it for the second judge: counting
                # it would be agreement no judge made, pulling every agent towards 1.
                not_judged[agent] = not_judged.get(agent, 0) + 1
                continue
            if verdict.verdict is Verdict.ungradeable:
                recorded_ungradeable[agent] = recorded_ungradeable.get(agent, 0) + 1
                continue
            if verdict.verifier_id in theirs:
                rows.append((theirs[verdict.verifier_id], verdict.verdict is Verdict.met))
        if on_trial is not None:
            on_trial()
        await asyncio.sleep(0)
    identity = second.identity()
    agents = {}
    for agent, rows in sorted(per_agent.items()):
        stats = agreement(rows, seed=seed, resamples=resamples)
        agents[agent] = {
            "model": next(t.spec.model for t in trials if t.spec.agent_name == agent),
            # The share of criteria where the two judges agree: accuracy with the recorded
            # verdict as the reference.
            "agreement_rate": stats.accuracy,
            "recorded_ungradeable": recorded_ungradeable.get(agent, 0),
            "not_judged": not_judged.get(agent, 0),
            **stats.model_dump(mode="json"),
        }
    return {
        "run": run,
        "run_judges": _judges(trials),
        "second_judge": {
            **identity.model_dump(mode="json"),
            "id": identity.id,
            "describe": identity.describe(),
        },
        "trials_skipped": skipped,
        # Graded by another judge than the run's (a regrade under way): not the run's verdicts.
        "trials_left_out": [
            {"trial_id": trial_id, "reason": reason} for trial_id, reason in left_out.items()
        ],
        "agents": agents,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def read_calibration(path: Path) -> dict[str, Any]:
    """An OUT.json of ``atoll judge calibrate``; raises AtollError(bad_input) naming ``path``
    when it is not one (older outputs lack the per-row verdicts that a comparison needs)."""
    if not path.is_file():
        raise AtollError(ErrorCode.bad_input, f"calibration {path}: no such file")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AtollError(ErrorCode.bad_input, f"calibration {path}: not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("rows_judged"), list):
        raise AtollError(
            ErrorCode.bad_input, f"calibration {path}: not an `atoll judge calibrate` output (no rows_judged)"
        )
    document["path"] = str(path)
    return document


def compare_calibrations(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two judges on the same labelled rows: per row whether each judge's verdict is the
    label, and the two-sided McNemar exact test on the rows exactly one got right (as the
    leaderboard compares agents). Rows either judge left ungradeable are left out and counted.
    Raises AtollError(bad_input) when the two were measured on different labels."""
    if first.get("labels_sha256") != second.get("labels_sha256"):
        raise AtollError(
            ErrorCode.bad_input,
            f"{first['path']} and {second['path']} were measured on different labels "
            f"({first.get('labels')} vs {second.get('labels')}); compare judges on the same rows",
        )

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["line"], row["task_id"], row["verifier_id"])

    theirs = {key(row): row for row in second["rows_judged"]}
    both_right = only_a = only_b = both_wrong = left_out = 0
    for row in first["rows_judged"]:
        other = theirs[key(row)]
        if "ungradeable" in (row["verdict"], other["verdict"]):
            left_out += 1
            continue
        a_right, b_right = row["verdict"] == row["label"], other["verdict"] == other["label"]
        both_right += a_right and b_right
        only_a += a_right and not b_right
        only_b += b_right and not a_right
        both_wrong += not a_right and not b_right
    n = both_right + only_a + only_b + both_wrong

    def side(document: dict[str, Any], correct: int) -> dict[str, Any]:
        return {
            "path": document["path"],
            "id": document["judge"]["id"],
            "describe": document["judge"]["describe"],
            "correct": correct,
            "accuracy": correct / n if n else None,
        }

    return {
        "labels": first.get("labels"),
        "labels_sha256": first.get("labels_sha256"),
        "n": n,
        "left_out": left_out,
        "a": side(first, both_right + only_a),
        "b": side(second, both_right + only_b),
        "both_right": both_right,
        "only_a_right": only_a,
        "only_b_right": only_b,
        "both_wrong": both_wrong,
        "p_value": mcnemar_exact(only_a, only_b),
        "test": "McNemar exact (two-sided binomial on the discordant rows)",
    }


__all__ = [
    "RecordedTrial",
    "compare_calibrations",
    "judged_by_another",
    "read_calibration",
    "recorded_trials",
    "run_agreement",
    "self_preference",
]
