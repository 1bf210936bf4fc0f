"""report.json as :mod:`orchestrator.report` writes it (docs/orchestrator.md, "Reports"), and
the reply model of ``GET /runs/{name}/report``, which serves the file's bytes as written. Its
JSON Schema is ``docs/schemas/report.schema.json``; real reports are checked against both
(tests/orchestrator/test_strict_json.py). Fields may be added (``extra="allow"``)."""

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


class ReportEstimate(_Open):
    """A metric with its 95% bootstrap interval over tasks; null values carry ``undefined``."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    tasks: int = Field(description="tasks behind the estimate")
    warning: str | None = Field(default=None, description="why the interval says little, when it does")
    undefined: dict[str, str] = Field(default_factory=dict, description="field -> why it is null")


class ReportEstimateAtK(ReportEstimate):
    """Pass@k or Pass^k: tasks with fewer than k graded runs are left out and counted."""

    excluded_tasks: int = 0
    excluded_task_ids: list[str] = Field(default_factory=list)


class ReportAgentMetrics(_Open):
    """One agent's metrics (overall, or within one domain), with their denominators."""

    tasks_total: int
    tasks_graded: int
    trials_graded: int
    trials_passed: int
    excluded_trials: dict[str, int] = Field(description="outcome -> trials left out of the metrics")
    exclusion_reasons: dict[str, int] = Field(description="reason -> trials left out for it")
    tasks_without_graded_runs: dict[str, dict[str, int]] = Field(
        description="task id -> reason -> runs: tasks no metric could use"
    )
    failed_trials_with_ungradeable_criteria: int
    ungradeable_criteria_in_failed_trials: int
    pass_at_1: ReportEstimate
    mean_score: ReportEstimate
    checks_pass: ReportEstimate
    pass_at_k: dict[str, ReportEstimateAtK] = Field(description="k -> Pass@k")
    pass_hat_k: dict[str, ReportEstimateAtK] = Field(description="k -> Pass^k")


class ReportPair(_Open):
    """McNemar's exact test on two agents' paired (task, run) outcomes, BH-adjusted."""

    a: str
    b: str
    pairs: int
    a_only: int = Field(description="pairs only a passed")
    b_only: int = Field(description="pairs only b passed")
    p_value: float
    q_value: float = Field(description="Benjamini–Hochberg adjusted across all pairs")
    significant: bool = Field(description="q ≤ 0.05")


class ReportBootstrap(_Open):
    resamples: int
    seed: int
    interval: str
    min_tasks_for_ci: int | None = None


class ReportMetrics(_Open):
    agents: list[str]
    overall: dict[str, ReportAgentMetrics] = Field(description="agent -> metrics")
    by_domain: dict[str, dict[str, ReportAgentMetrics]] = Field(description="domain -> agent -> metrics")
    pairwise: list[ReportPair]
    pairwise_by_domain: dict[str, list[ReportPair]] = Field(description="domain -> pairwise tests")
    duplicates_dropped: int
    bootstrap: ReportBootstrap


class ReportAgentUsage(_Open):
    """One agent's trials, outcomes, usage and cost (cost None where it is not known)."""

    model: str
    trials: int
    finished: int
    outcomes: dict[str, int] = Field(description="outcome -> trials")
    exclusion_reasons: dict[str, int] = Field(default_factory=dict)
    steps: int
    tool_calls: int
    mean_steps: float | None = None
    mean_tool_calls: float | None = None
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    agent_cost_usd: float
    judge_cost_usd: float
    coworker_cost_usd: float = Field(0.0, description="the world's personas' model calls")
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_reasoning_tokens: int = 0
    judge_cached_tokens: int = 0
    duration_s: float
    unpriced_trials: int = 0
    coworker_unpriced_trials: int = 0
    judge_unpriced_trials: int = 0
    cost_unpriced_trials: int = 0
    agent_cost_known: bool = True
    judge_cost_known: bool = True
    mean_cost_usd: float | None = None
    check_disagreements: int | None = None


class ReportJudgeGradings(_Open):
    counted: int = Field(description="finished trials graded by the run's judge")
    not_recorded: int = Field(description="results recorded before atoll recorded judges")
    other_judges: list[dict[str, Any]] = Field(description="judges whose gradings are left out, with why")
    judges_seen: list[dict[str, Any]] = Field(description="with no judge recorded for the run: those seen")


class ReportJudge(_Open):
    """The run's judge, and how many trials its verdicts count (``orchestrator.judging``)."""

    id: str | None
    model: str | None
    describe: str
    identity: dict[str, Any] | None = Field(description="atoll.judge.JudgeIdentity, as JSON")
    label: str
    calibration: str | None
    gradings: ReportJudgeGradings


class ReportHeadline(_Open):
    """One agent's pass rate over its graded trials, in a line."""

    agent: str
    model: str
    passes: int
    graded: int
    pass_rate: float | None
    finished: int
    trials: int
    cost: str
    line: str


class ReportGroup(_Open):
    """Trials sharing one value of a failure dimension."""

    key: str
    count: int
    trials: list[str] = Field(description="exactly its trial ids")


class ReportDisagreement(_Open):
    """A criterion whose programmatic check and judge disagreed in one trial."""

    trial_id: str
    task_id: str
    agent: str
    run_index: int
    link: str | None
    verifier_id: str
    criterion: str
    check_verdict: str | None
    judge_verdict: str
    rationale: str


class ReportUnreadable(_Open):
    trial_id: str
    problem: str


class ReportDisagreements(_Open):
    count: int = Field(description="as the trials' results recorded it")
    trials: int = Field(description="trials with at least one")
    rows: list[ReportDisagreement]
    unreadable: list[ReportUnreadable] = Field(description="grades that could not be read")


class ReportLeftOut(_Open):
    duplicate_trials: int
    archives: list[dict[str, Any]]
    archived_trials: int


class ReportDocument(_Open):
    """report.json (``GET /runs/{name}/report`` serves it as written)."""

    experiment: str
    generated_at: str
    benchmark: str | None
    fingerprint: str | None
    judge: ReportJudge | None = None
    runs_per_task: int
    trials: dict[str, int] = Field(description="trials per state and total")
    outcome: str = Field(description="the run in one line")
    banner: ReportBanner | None
    cost: ReportCost
    headline: list[ReportHeadline] = Field(default_factory=list)
    viewer_url: str | None = None
    failures: list[ReportFailure]
    failure_analysis: dict[str, list[ReportGroup]] = Field(
        default_factory=dict,
        description="dimension (criterion, target_kind, end_reason, error_kind, outcome) -> its groups",
    )
    check_disagreements: ReportDisagreements | None = None
    matrix: ReportMatrix
    trial_rows: list[ReportTrial]
    agents: dict[str, ReportAgentUsage] = Field(description="per agent: usage, cost, outcomes, exclusions")
    metrics: ReportMetrics = Field(
        description="overall and by domain: Pass@1, Pass@k, Pass^k, mean score with intervals; pairwise tests"
    )
    excluded_tasks: dict[str, Any] = Field(default_factory=dict, description="task id -> why it was left out")
    left_out: ReportLeftOut | None = None
    warnings: list[str]
    notes: list[str]
