"""The reply model of ``GET /runs/{name}/report``: report.json as :mod:`orchestrator.report`
writes it (docs/orchestrator.md, "Reports"). The route serves the file's bytes as written; this
model is what its OpenAPI document declares, checked against real reports by the property tests
(tests/orchestrator/test_api_properties.py). Fields may be added (``extra="allow"``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from atoll.report_rows import ReportTrial


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReportBanner(_Open):
    """Why the run is not complete (None in the report when it is)."""

    kind: str = Field(description="aborted, stopped, interrupted, cancelled or not finished")
    reason: str | None
    detail: str | None
    at: float | None = Field(description="when it stopped (unix seconds); null: not recorded")
    unfinished: int
    title: str
    message: str


class ReportCost(_Open):
    known_usd: float = Field(description="agent and judge cost of the finished trials with a price")
    unpriced_trials: int
    finished_trials: int


class ReportFailure(_Open):
    """Trials that did not pass, grouped by end reason or error."""

    reason: str
    count: int
    outcome: str
    error_kind: str | None
    trials: list[str] = Field(description="their trial ids")


class ReportTask(_Open):
    task_id: str
    domain: str
    task_name: str | None


class ReportCell(_Open):
    """One agent × task cell: passes of graded runs; excluded and unfinished runs apart."""

    passes: int
    graded: int
    runs: int
    excluded: int
    unfinished: int


class ReportMatrix(_Open):
    agents: list[str]
    tasks: list[ReportTask]
    cells: dict[str, dict[str, ReportCell]] = Field(description="agent -> task id -> cell")


class ReportDocument(_Open):
    """``GET /runs/{name}/report``: report.json as written, served as is."""

    experiment: str
    generated_at: str
    benchmark: str | None
    fingerprint: str | None
    runs_per_task: int
    trials: dict[str, int] = Field(description="trials per state and total")
    outcome: str = Field(description="the run in one line")
    banner: ReportBanner | None
    cost: ReportCost
    failures: list[ReportFailure]
    matrix: ReportMatrix
    trial_rows: list[ReportTrial]
    agents: dict[str, dict[str, Any]] = Field(description="per agent: usage, cost, outcomes, exclusions")
    metrics: dict[str, Any] = Field(
        description="overall and by domain: Pass@1, Pass@k, Pass^k, mean score with intervals; pairwise tests"
    )
    warnings: list[str]
    notes: list[str]
