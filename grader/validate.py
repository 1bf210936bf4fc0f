"""Judge validation: grade gold outputs (all should be met) and a human-labelled set.

Labelled set: JSONL, one object per line with ``output`` (the agent's output text),
``criterion`` (text) and ``label`` (``met``/``not_met``, or a boolean), optionally
``task_prompt`` and ``id``.  The positive class is *met*; ungradeable verdicts are counted
and left out of the confusion matrix.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from atoll.benchmark import Benchmark, Criterion, GradingTarget, Task
from atoll.errors import AtollError, ErrorCode
from atoll.grade import Verdict
from grader.cache import VerdictCache
from grader.calibrate import LabelRow, judge_rows, read_jsonl
from grader.calibration import confusion, statistics
from grader.gold import build_gold_world
from grader.grading import grade_trial
from grader.judge import JudgeConfig


class Metrics(BaseModel):
    """Binary agreement with human labels (positive class: met)."""

    total: int = 0
    graded: int = 0
    ungradeable: int = 0
    true_positive: int = 0
    false_positive: int = 0
    true_negative: int = 0
    false_negative: int = 0
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    cohen_kappa: float | None = None
    false_positive_rate: float | None = None
    false_negative_rate: float | None = None
    undefined: dict[str, str] = Field(
        default_factory=dict, description="statistic -> why it is undefined (its value is null)"
    )


def compute_metrics(pairs: list[tuple[Verdict, bool]]) -> Metrics:
    """Metrics from ``(judge verdict, human label is met)`` pairs: the confusion matrix and
    statistics of :mod:`grader.calibration` (the one home of the formulas), plus the false
    positive and false negative rates."""
    counts, ungradeable = confusion(pairs)
    values, reasons = statistics(counts)
    tp, fp, tn, fn = counts.tp, counts.fp, counts.tn, counts.fn
    if not fp + tn:
        reasons["false_positive_rate"] = "no decided row's reference is not met (fp + tn = 0)"
    if not fn + tp:
        reasons["false_negative_rate"] = "no decided row's reference is met (fn + tp = 0)"
    return Metrics(
        total=len(pairs),
        graded=counts.n,
        ungradeable=ungradeable,
        true_positive=tp,
        false_positive=fp,
        true_negative=tn,
        false_negative=fn,
        accuracy=values["accuracy"],
        precision=values["precision"],
        recall=values["recall"],
        f1=values["f1"],
        cohen_kappa=values["cohen_kappa"],
        false_positive_rate=fp / (fp + tn) if fp + tn else None,
        false_negative_rate=fn / (fn + tp) if fn + tp else None,
        undefined=reasons,
    )


class Disagreement(BaseModel):
    item: str
    expected: str
    verdict: Verdict
    rationale: str = ""


class GoldCriterionResult(BaseModel):
    verifier_id: str
    criterion: str
    verdict: Verdict
    decided_by: str = ""
    rationale: str = ""


class GoldTaskResult(BaseModel):
    """One gold output graded: every criterion should be met."""

    task_id: str
    answer: bool = Field(description="the gold output has a text answer")
    files: int = Field(description="gold files graded")
    passed: bool
    score: float
    criteria: list[GoldCriterionResult] = Field(default_factory=list)


class ValidationReport(BaseModel):
    """Gold and labelled-set results of one judge configuration."""

    judge_model: str
    prompt_version: str
    gold: Metrics | None = None
    gold_tasks: int = 0
    gold_results: list[GoldTaskResult] = Field(default_factory=list)
    labelled: Metrics | None = None
    disagreements: list[Disagreement] = Field(default_factory=list)
    judge_cost_usd: float = 0.0


async def validate_gold(
    benchmark: Benchmark,
    judge: JudgeConfig,
    report: ValidationReport,
    *,
    task_ids: list[str] | None = None,
    cache: VerdictCache | None = None,
) -> None:
    """Grade every task's gold output (answer and files) with ``judge`` and its checks; every
    criterion is expected met.  Results go to ``report`` per task and per criterion.

    Raises AtollError(bad_input) for an unknown id in ``task_ids`` and when no selected task
    has a gold output, so an empty report never passes for a successful validation.
    """
    pairs: list[tuple[Verdict, bool]] = []
    if task_ids is not None:
        known = {t.task_id for t in benchmark.tasks}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise AtollError(
                ErrorCode.bad_input, f"--task-id {unknown[0]!r}: no such task in {benchmark.root}"
            )
    tasks = [t for t in benchmark.tasks if (task_ids is None or t.task_id in task_ids)]
    tasks = [t for t in tasks if t.gold_output is not None or t.reference_solution is not None]
    if not tasks:
        raise AtollError(
            ErrorCode.bad_input,
            f"{benchmark.root}: none of the {len(benchmark.tasks)} selected tasks has a gold output "
            "(gold_response, gold_files/<task_id>/, gold_output or reference_solution); nothing to validate",
        )
    with tempfile.TemporaryDirectory(prefix="atoll-gold-") as scratch:
        for task in tasks:
            gold = build_gold_world(benchmark, task, Path(scratch) / task.task_id)
            grade = await grade_trial(task, gold.before, gold.after, gold.trajectory, judge, cache)
            report.judge_cost_usd += grade.judge_cost_usd
            report.gold_results.append(
                GoldTaskResult(
                    task_id=task.task_id,
                    answer=bool((gold.trajectory.final_answer or "").strip()),
                    files=len(task.gold_output.files) if task.gold_output else 0,
                    passed=grade.passed,
                    score=grade.score,
                    criteria=[
                        GoldCriterionResult(
                            verifier_id=v.verifier_id,
                            criterion=v.criterion,
                            verdict=v.verdict,
                            decided_by=v.decided_by,
                            rationale=v.ungradeable_reason or v.rationale,
                        )
                        for v in grade.criteria
                    ],
                )
            )
            for verdict in grade.criteria:
                pairs.append((verdict.verdict, True))
                if verdict.verdict is not Verdict.met:
                    report.disagreements.append(
                        Disagreement(
                            item=f"gold {task.task_id} {verdict.verifier_id}",
                            expected="met",
                            verdict=verdict.verdict,
                            rationale=verdict.ungradeable_reason or verdict.rationale,
                        )
                    )
    report.gold_tasks = len(tasks)
    report.gold = compute_metrics(pairs)


def _label(value: Any, line: int, path: Path) -> bool:
    if isinstance(value, bool):
        return value
    normalised = str(value).strip().lower().replace(" ", "_").replace("-", "_")
    if normalised in ("met", "true", "1", "yes", "pass"):
        return True
    if normalised in ("not_met", "unmet", "false", "0", "no", "fail"):
        return False
    raise AtollError(ErrorCode.bad_input, f"{path}:{line}: label must be met or not_met, got {value!r}")


def read_labelled(path: Path) -> list[dict[str, Any]]:
    """Parse the labelled JSONL; raises AtollError naming the line of a bad record."""
    records = []
    for number, record in read_jsonl(path, "labelled set"):
        if not isinstance(record.get("criterion"), str) or "label" not in record:
            raise AtollError(ErrorCode.bad_input, f"{path}:{number}: needs 'output', 'criterion' and 'label'")
        record["label"] = _label(record["label"], number, path)
        record.setdefault("id", f"line {number}")
        records.append(record)
    return records


async def validate_labelled(
    path: Path, judge: JudgeConfig, report: ValidationReport, cache: VerdictCache | None = None
) -> None:
    """Judge each labelled output against its criterion (final-answer evidence, the rows one
    after another through :func:`grader.calibrate.judge_rows`) and score agreement."""
    records = read_labelled(path)
    tasks: dict[str, Task] = {}
    rows: list[LabelRow] = []
    for index, record in enumerate(records):
        # Each row is a task of one criterion of its own; ids given by the user may repeat.
        key = f"row-{index}"
        tasks[key] = Task(
            task_id=str(record["id"]),
            world_id="labelled",
            prompt=str(record.get("task_prompt") or record.get("prompt") or "(task prompt not given)"),
            rubric=[
                Criterion(
                    verifier_id=str(record["id"]),
                    criteria=record["criterion"],
                    grading_target=GradingTarget(kind="final_answer"),
                )
            ],
        )
        rows.append(
            LabelRow(index + 1, key, str(record["id"]), record["label"], str(record.get("output") or ""))
        )
    verdicts, cost = await judge_rows(rows, tasks, judge, cache=cache)
    report.judge_cost_usd += cost
    pairs: list[tuple[Verdict, bool]] = []
    for record, verdict in zip(records, verdicts, strict=True):
        pairs.append((verdict.verdict, record["label"]))
        expected = "met" if record["label"] else "not_met"
        if verdict.verdict.value != expected:
            report.disagreements.append(
                Disagreement(
                    item=f"labelled {record['id']}",
                    expected=expected,
                    verdict=verdict.verdict,
                    rationale=verdict.ungradeable_reason or verdict.rationale,
                )
            )
    report.labelled = compute_metrics(pairs)
