"""Re-judge a stored trial (trajectory + snapshots) and say how the verdicts moved.

``atoll regrade RUN`` (the orchestrator) calls ``regrade`` for every recorded trial; with a
VerdictCache, criteria whose evidence, judge and prompt are unchanged cost nothing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from atoll.benchmark import Task
from atoll.grade import Grade, Verdict
from atoll.trajectory import Trajectory
from grader.cache import VerdictCache
from grader.extract import ExtractOptions
from grader.grading import grade_trial
from grader.judge import JudgeConfig
from grader.snapshot import AnySnapshot


class VerdictChange(BaseModel):
    """Old and new verdict of one criterion, with who decided each."""

    verifier_id: str
    old_verdict: Verdict | None
    new_verdict: Verdict
    changed: bool
    old_judge_model: str | None = None
    new_judge_model: str | None = None
    old_prompt_version: str | None = None
    new_prompt_version: str | None = None
    cached: bool = False


class RegradeReport(BaseModel):
    """Provenance of a regrade: per-criterion movements and the task-level before/after."""

    task_id: str
    trial_id: str | None = None
    criteria: list[VerdictChange] = Field(default_factory=list)
    changed: int = 0
    old_passed: bool | None = None
    new_passed: bool
    old_score: float | None = None
    new_score: float
    judge_cost_usd: float = 0.0


async def regrade(
    task: Task,
    before: str | Path | AnySnapshot,
    after: str | Path | AnySnapshot,
    trajectory: Trajectory | None,
    old_grade: Grade | None,
    judge: JudgeConfig | None,
    cache: VerdictCache | None = None,
    *,
    options: ExtractOptions | None = None,
) -> tuple[Grade, RegradeReport]:
    """Grade again and compare with ``old_grade`` (matched by verifier id).

    The new grade carries ``regraded_from`` (the old grade's verdicts) as provenance.  Errors
    are those of ``grade_trial``.
    """
    grade = await grade_trial(task, before, after, trajectory, judge, cache, options=options)
    old = {v.verifier_id: v for v in (old_grade.criteria if old_grade else [])}
    report = RegradeReport(
        task_id=task.task_id,
        trial_id=grade.trial_id or (old_grade.trial_id if old_grade else None),
        new_passed=grade.passed,
        new_score=grade.score,
        old_passed=old_grade.passed if old_grade else None,
        old_score=old_grade.score if old_grade else None,
        judge_cost_usd=grade.judge_cost_usd,
    )
    for verdict in grade.criteria:
        previous = old.get(verdict.verifier_id)
        change = VerdictChange(
            verifier_id=verdict.verifier_id,
            old_verdict=previous.verdict if previous else None,
            new_verdict=verdict.verdict,
            changed=previous is None or previous.verdict is not verdict.verdict,
            old_judge_model=previous.judge_model if previous else None,
            new_judge_model=verdict.judge_model,
            old_prompt_version=previous.prompt_version if previous else None,
            new_prompt_version=verdict.prompt_version,
            cached=verdict.cached,
        )
        report.criteria.append(change)
    report.changed = sum(c.changed for c in report.criteria)
    if old_grade is not None:
        grade = grade.model_copy(
            update={"regraded_from": [v.model_dump(mode="json") for v in old_grade.criteria]}
        )
    return grade, report
