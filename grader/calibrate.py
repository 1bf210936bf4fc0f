"""Judge calibration: the judge decides human-labelled rows of a benchmark's criteria, and
its verdicts are scored against the labels (:mod:`grader.calibration`).

A labels file is JSONL, one object a line::

    {"task_id": "...", "verifier_id": "...", "answer": "...", "label": "met" | "not_met"}

optionally with ``trajectory`` (a path, relative to the labels file, or an inline
trajectory object; ``answer``, when given, is its final answer) and ``before``/``after``
(snapshot paths, tar.gz or world zip, for criteria that need the world; by default both
are the empty world). Each row is graded as :func:`grader.grading.grade_trial` grades a
trial, on that one criterion of the task, with the answer as the final answer; the label
is never part of what the judge is shown.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atoll.benchmark import Benchmark, Task
from atoll.errors import AtollError, ErrorCode
from atoll.grade import CriterionVerdict, Verdict
from atoll.judge import JudgeConfig
from atoll.trajectory import RunStatus, Trajectory
from grader.cache import VerdictCache
from grader.calibration import DEFAULT_SEED, RESAMPLES, summary
from grader.diff import diff_snapshots
from grader.gold import write_tar
from grader.grading import grade_trial
from grader.snapshot import Snapshot

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_LABELS = {"met": True, "not_met": False}


@dataclass(frozen=True)
class LabelRow:
    """One labelled row: where it is (``line`` of the labels file), what is judged, the label."""

    line: int
    task_id: str
    verifier_id: str
    label: bool
    answer: str | None = None
    trajectory: Trajectory | None = None
    before: Path | None = None
    after: Path | None = None


def parse_label(value: Any, where: str) -> bool:
    """``"met"`` → True, ``"not_met"`` → False; raises AtollError(bad_input) naming ``where``."""
    if isinstance(value, str) and value in _LABELS:
        return _LABELS[value]
    raise AtollError(ErrorCode.bad_input, f'{where}: label must be "met" or "not_met", got {value!r}')


def read_jsonl(path: Path, what: str = "labels") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of the JSONL file ``path`` (named
    ``what`` in errors); raises AtollError(bad_input) naming ``path:line`` for a line that is
    not a JSON object, and for a missing or empty file."""
    if not path.is_file():
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: no such file")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise AtollError(ErrorCode.bad_input, f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise AtollError(ErrorCode.bad_input, f"{path}:{number}: expected a JSON object")
        records.append((number, record))
    if not records:
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: no rows")
    return records


def _text(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise AtollError(ErrorCode.bad_input, f"{where}: needs {key!r} (a non-empty string)")
    return value


def _file(record: dict[str, Any], key: str, where: str, base: Path) -> Path | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise AtollError(ErrorCode.bad_input, f"{where}: {key!r} must be a path")
    path = (base / value) if not Path(value).is_absolute() else Path(value)
    if not path.is_file():
        raise AtollError(ErrorCode.bad_input, f"{where}: {key} {path}: no such file")
    return path


def _trajectory(record: dict[str, Any], where: str, base: Path) -> Trajectory | None:
    from grader.inputs import load_trajectory, trajectory_from_data

    value = record.get("trajectory")
    if value is None:
        return None
    if isinstance(value, dict):
        return trajectory_from_data(value, f"{where}: trajectory")
    path = _file(record, "trajectory", where, base)
    assert path is not None
    try:
        return load_trajectory(path)
    except AtollError as exc:
        raise AtollError(ErrorCode.bad_input, f"{where}: {exc.message}") from None


def read_labels(path: Path, benchmark: Benchmark) -> list[LabelRow]:
    """Every row of the labels file, checked against ``benchmark`` before any judge call.

    Raises AtollError(bad_input) naming ``path:line`` for the first bad row: not JSON, a
    missing field, an unknown task or criterion, a label other than met/not_met, neither an
    answer nor a trajectory, a snapshot or trajectory file that does not exist, or only one
    of before/after."""
    tasks = {task.task_id: task for task in benchmark.tasks}
    rows = []
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        task_id = _text(record, "task_id", where)
        verifier_id = _text(record, "verifier_id", where)
        task = tasks.get(task_id)
        if task is None:
            raise AtollError(ErrorCode.bad_input, f"{where}: task {task_id!r} is not in {benchmark.root}")
        if not any(c.verifier_id == verifier_id for c in task.rubric):
            raise AtollError(
                ErrorCode.bad_input, f"{where}: task {task_id!r} has no criterion {verifier_id!r}"
            )
        if "label" not in record:
            raise AtollError(ErrorCode.bad_input, f'{where}: needs \'label\' ("met" or "not_met")')
        label = parse_label(record["label"], where)
        answer = record.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise AtollError(ErrorCode.bad_input, f"{where}: 'answer' must be a string")
        trajectory = _trajectory(record, where, path.parent)
        if answer is None and trajectory is None:
            raise AtollError(ErrorCode.bad_input, f"{where}: needs 'answer' (or a 'trajectory')")
        before = _file(record, "before", where, path.parent)
        after = _file(record, "after", where, path.parent)
        if (before is None) != (after is None):
            raise AtollError(
                ErrorCode.bad_input, f"{where}: give both 'before' and 'after' snapshots, or neither"
            )
        rows.append(LabelRow(number, task_id, verifier_id, label, answer, trajectory, before, after))
    return rows


def _row_trajectory(row: LabelRow) -> Trajectory:
    if row.trajectory is not None:
        if row.answer is None:
            return row.trajectory
        return row.trajectory.model_copy(update={"final_answer": row.answer})
    return Trajectory(
        agent="labelled",
        model="labelled",
        status=RunStatus.completed,
        final_answer=row.answer,
        started_at=_EPOCH,
        ended_at=_EPOCH,
    )


async def judge_rows(
    rows: list[LabelRow],
    tasks: Mapping[str, Task],
    judge: JudgeConfig,
    *,
    cache: VerdictCache | None = None,
    concurrency: int = 1,
    on_row: Callable[[], None] | None = None,
) -> tuple[list[CriterionVerdict], float]:
    """The judge's verdict on each row (in order) and what the judge's calls cost (USD);
    ``tasks`` maps each row's ``task_id`` to its task (a benchmark's tasks by id).

    Rows are judged ``concurrency`` at a time; with 1 (the default) one after another in
    file order, so the same labels make the same calls in the same order. Raises AtollError("model_endpoint") when the
    judge's endpoint cannot work as configured, and AtollError("snapshot_unreadable")."""
    limit = asyncio.Semaphore(max(1, concurrency))
    cost = 0.0
    with tempfile.TemporaryDirectory(prefix="atoll-calibrate-") as scratch:
        empty = Snapshot(write_tar(Path(scratch) / "empty.tar.gz", {}))
        empty_world = diff_snapshots(empty, empty)

        async def one(row: LabelRow) -> CriterionVerdict:
            nonlocal cost
            task = _one_criterion(tasks[row.task_id], row.verifier_id)
            async with limit:
                if row.before is not None and row.after is not None:
                    grade = await grade_trial(task, row.before, row.after, _row_trajectory(row), judge, cache)
                else:
                    grade = await grade_trial(
                        task, empty, empty, _row_trajectory(row), judge, cache, world=empty_world
                    )
            cost += grade.judge_cost_usd
            if on_row is not None:
                on_row()
            return grade.criteria[0]

        verdicts = await asyncio.gather(*(one(row) for row in rows))
    return list(verdicts), cost


def _one_criterion(task: Task, verifier_id: str) -> Task:
    criterion = next(c for c in task.rubric if c.verifier_id == verifier_id)
    return task.model_copy(update={"rubric": [criterion]})


def file_digest(path: Path) -> str:
    """sha256 of a file: which labels a calibration was measured on."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def calibration_report(
    rows: list[LabelRow],
    verdicts: list[CriterionVerdict],
    domains: list[str],
    *,
    judge: JudgeConfig,
    labels: Path,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
    **extra: Any,
) -> dict[str, Any]:
    """OUT.json of ``atoll judge calibrate``: the judge's identity, the statistics with their
    intervals, confusion matrix and per-domain rows, every disagreement with the judge's
    rationale, every ungradeable row with its reason, and each row's verdict (for ``atoll
    judge compare``)."""
    identity = judge.identity()
    pairs = [(verdict.verdict, row.label) for row, verdict in zip(rows, verdicts, strict=True)]
    report: dict[str, Any] = {
        "judge": {**identity.model_dump(mode="json"), "id": identity.id, "describe": identity.describe()},
        "labels": str(labels),
        "labels_sha256": file_digest(labels),
        **extra,
        **summary(pairs, domains, seed=seed, resamples=resamples),
    }
    report["disagreements"] = [
        _row_entry(row, verdict)
        for row, verdict in zip(rows, verdicts, strict=True)
        if verdict.verdict is not Verdict.ungradeable and (verdict.verdict is Verdict.met) != row.label
    ]
    report["ungradeable_rows"] = [
        _row_entry(row, verdict)
        for row, verdict in zip(rows, verdicts, strict=True)
        if verdict.verdict is Verdict.ungradeable
    ]
    report["rows_judged"] = [
        {
            "line": row.line,
            "task_id": row.task_id,
            "verifier_id": row.verifier_id,
            "label": "met" if row.label else "not_met",
            "verdict": verdict.verdict.value,
        }
        for row, verdict in zip(rows, verdicts, strict=True)
    ]
    report["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return report


def _row_entry(row: LabelRow, verdict: CriterionVerdict) -> dict[str, Any]:
    return {
        "line": row.line,
        "task_id": row.task_id,
        "verifier_id": row.verifier_id,
        "label": "met" if row.label else "not_met",
        "verdict": verdict.verdict.value,
        "decided_by": verdict.decided_by,
        "rationale": verdict.ungradeable_reason or verdict.rationale,
    }


__all__ = [
    "LabelRow",
    "calibration_report",
    "file_digest",
    "judge_rows",
    "parse_label",
    "read_jsonl",
    "read_labels",
]
