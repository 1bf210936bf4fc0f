"""The JSON replies of `atoll view`'s API (``orchestrator/viewer/app.py``, docs/viewer.md): one
model per route. The routes build them as plain JSON; these models are what they promise, their
JSON Schemas are ``docs/schemas/viewer_*.schema.json``, and real replies are checked against
both (tests/orchestrator/viewer/test_viewer_api.py). Fields may be added (``extra="allow"``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from atoll.report_document import ReportCell, ReportGroup, ReportJudge
from atoll.trajectory import RunStatus
from atoll.trial import Outcome, TrialState


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ViewerTrialRow(_Open):
    """One line of a run's trial table: the report's trial row (``atoll.report_rows.ReportTrial``,
    the same rule) with the columns the page shows."""

    trial_id: str
    run: str
    task_id: str
    domain: str
    agent: str
    model: str
    run_index: int
    state: TrialState
    attempts: int
    outcome: Outcome | None = Field(description="None: unfinished")
    score: float | None
    judge_id: str | None
    left_out: str | None = Field(description="why a finished trial is in no metric (another judge's)")
    end_reason: RunStatus | None
    error: str | None
    error_kind: str | None = Field(description="atoll.trial.error_kind")
    steps: int | None
    tool_calls: int | None
    tokens: int | None = Field(description="prompt + completion tokens")
    reasoning_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None = Field(description="agent + judge; None: unfinished, or a cost unknown")
    cost: str | None = Field(description="``$N.NNNN`` or ``unknown``; None: unfinished")
    duration_s: float | None
    finished_at: str | None


class ViewerSpecSummary(_Open):
    benchmark: str | None
    agents: list[dict[str, Any]] = Field(description="{name, agent, model} per agent")
    runs: int
    judge_model: str | None
    executor: str | None
    artifacts: str | None


class ViewerRunSummary(_Open):
    """A run as the run list shows it."""

    name: str
    status: str = Field(description="queued, running, incomplete, finished, …")
    counts: dict[str, int] = Field(description="trials per state and total")
    outcomes: dict[str, int] = Field(description="outcome -> finished trials")
    cost_usd: float
    unpriced_trials: int
    cost: str
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    fingerprint: str | None
    judge: ReportJudge
    spec: ViewerSpecSummary


class ViewerRuns(_Open):
    """``GET /api/runs``."""

    store: str = Field(description="the store's URL, any password shown as ***")
    runs: list[ViewerRunSummary]


class ViewerFailureTrial(_Open):
    trial_id: str
    task_id: str
    agent: str
    run_index: int


class ViewerFailure(_Open):
    """A failure group as report.json has it (``ReportFailure``), each trial with its task,
    agent and run index."""

    reason: str
    count: int
    outcome: str
    error_kind: str | None
    trials: list[ViewerFailureTrial]


class ViewerMatrixTask(_Open):
    task_id: str
    domain: str


class ViewerMatrix(_Open):
    """Agents × tasks, tasks in (domain, task id) order (report.json's matrix without task names)."""

    agents: list[str]
    tasks: list[ViewerMatrixTask]
    cells: dict[str, dict[str, ReportCell]] = Field(description="agent -> task id -> cell")


class ViewerRun(ViewerRunSummary):
    """``GET /api/runs/{name}``: the summary with the run's leaderboard, matrix and failures."""

    leaderboard: list[dict[str, Any]] = Field(description="report.md's leaderboard rows")
    matrix: ViewerMatrix
    failures: list[ViewerFailure]
    failure_analysis: dict[str, list[ReportGroup]] = Field(
        description="as report.json's (dimension -> groups)"
    )
    banner: dict[str, Any] | None = Field(description="why the run is not complete; None: it is, or it runs")
    progress: dict[str, Any] | None = Field(description="a running or incomplete run's progress")
    excluded_tasks: dict[str, Any]
    duplicate_trials: int


class ViewerRunTrials(_Open):
    """``GET /api/runs/{name}/trials``."""

    run: str
    trials: list[ViewerTrialRow]


class ViewerCompare(_Open):
    """``GET /api/compare?a=&b=``: two runs' agents paired by name."""

    a: dict[str, Any] = Field(description="run a's summary")
    b: dict[str, Any] = Field(description="run b's summary")
    pairs: list[dict[str, Any]] = Field(description="one per agent both runs have, with McNemar's test")
    unfinished: list[str] = Field(description="the runs that are not finished")
    notes: list[str]


class ViewerTrial(_Open):
    """``GET /api/trials/{id}``: everything the trial page shows."""

    trial: dict[str, Any] = Field(description="its trial row (ViewerTrialRow) with its check columns")
    runs: list[str] = Field(description="the runs that hold the trial")
    spec: dict[str, Any] = Field(description="atoll.trial.TrialSpec, as JSON")
    problems: list[str] = Field(description="artifacts that could not be read")
    attempts: list[dict[str, Any]]
    running: dict[str, Any] | None = Field(description="a running attempt's progress")


class ViewerRawExchanges(_Open):
    """``GET /api/trials/{id}/raw/{step}``: the raw model exchanges of one model call step."""

    step: int
    exchanges: list[dict[str, Any]] = Field(description="request as sent to litellm, raw response")


__all__ = [
    "ViewerCompare",
    "ViewerFailure",
    "ViewerRawExchanges",
    "ViewerRun",
    "ViewerRunSummary",
    "ViewerRunTrials",
    "ViewerRuns",
    "ViewerSpecSummary",
    "ViewerTrial",
    "ViewerTrialRow",
]
