"""The per-trial rows of ``report.json`` (``trial_rows``): what a user needs to find and open
each trial of a run. The JSON Schema is ``docs/schemas/report_trial.schema.json``."""

from __future__ import annotations

from pydantic import BaseModel, Field

from atoll.trajectory import RunStatus
from atoll.trial import Outcome, TrialState


class ReportArtifacts(BaseModel):
    """Where a trial's recorded artifacts are (URIs as the store recorded them)."""

    folder: str | None = Field(
        default=None, description="the attempt's artifact folder (parent of the trajectory)"
    )
    trajectory: str | None = None
    grade: str | None = None
    snapshot_before: str | None = Field(default=None, description="the initial world (the seed's snapshot)")
    snapshot_after: str | None = Field(default=None, description="the world the agent left")


class ReportTrial(BaseModel):
    """One trial of a run: one (agent, task, run index), with its latest recorded result."""

    trial_id: str
    run: str = Field(description="the run (experiment) name")
    task_id: str
    task_name: str | None = Field(default=None, description="from the benchmark, when it could be read")
    domain: str = ""
    agent: str
    model: str
    run_index: int
    state: TrialState
    attempt: int | None = Field(
        default=None, description="the attempt the result is from (None: no result yet)"
    )
    attempts: int = Field(default=0, description="attempts made so far")
    outcome: Outcome | None = Field(default=None, description="None: unfinished")
    score: float | None = None
    judge_id: str | None = Field(
        default=None,
        description="JudgeIdentity.id of the grading the result counts (None: never graded, or "
        "recorded before atoll recorded judges)",
    )
    left_out: str | None = Field(
        default=None,
        description="why this finished trial is in no metric: graded by another judge than the run's "
        "(a regrade not finished); None: counted as its outcome says",
    )
    end_reason: RunStatus | None = Field(default=None, description="how the agent's run ended")
    error: str | None = None
    error_kind: str | None = Field(
        default=None, description="the error's recorded kind (infrastructure, …; atoll.trial.error_kind)"
    )
    failure: str | None = Field(default=None, description="the failure group this trial is listed under")
    checks_met: int | None = Field(
        default=None, description="criteria whose programmatic check passed (no judge moves it)"
    )
    checks_total: int | None = Field(default=None, description="criteria with a programmatic check")
    check_disagreements: int | None = Field(
        default=None, description="criteria where the judge's verdict differs from its check's"
    )
    steps: int | None = None
    tool_calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = Field(default=None, description="of completion_tokens, the reasoning")
    cached_tokens: int | None = Field(
        default=None, description="of prompt_tokens, read from the prompt cache"
    )
    cache_write_tokens: int | None = Field(
        default=None, description="of prompt_tokens, written to the prompt cache"
    )
    agent_cost_usd: float | None = Field(default=None, description="None: unknown (tokens without a price)")
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    judge_reasoning_tokens: int | None = Field(
        default=None, description="of judge_completion_tokens, the reasoning"
    )
    judge_cached_tokens: int | None = Field(
        default=None, description="of judge_prompt_tokens, read from the prompt cache"
    )
    judge_cost_usd: float | None = Field(
        default=None, description="None: unknown (judge tokens without a price)"
    )
    coworker_cost_usd: float | None = Field(
        default=None,
        description="the world's personas' model calls (their replies to the agent); None: unknown",
    )
    cost_usd: float | None = Field(
        default=None,
        description="agent + personas + judge; None when the agent's, the personas' or the judge's cost is unknown",
    )
    duration_s: float | None = None
    finished_at: str | None = None
    artifacts: ReportArtifacts = Field(default_factory=ReportArtifacts)
    viewer_url: str | None = Field(
        default=None, description="the trial's page in `atoll view` (with --viewer-url)"
    )
    link: str | None = Field(
        default=None, description="where the report links the trial: viewer page, else folder"
    )


__all__ = ["ReportArtifacts", "ReportTrial"]
