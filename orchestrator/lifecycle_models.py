"""The replies of the run lifecycle (:mod:`orchestrator.lifecycle`): what ``GET /runs``,
``GET /runs/{name}``, its trials and the control verbs answer, and what the CLI prints."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from atoll.grade import CriterionVerdict
from atoll.judge import JudgeIdentity
from atoll.trial import Outcome, TrialState

Counts = dict[str, int]
COUNTS = "trials per state (pending, leased, done, infra_error, cancelled) and total"


class RunState(StrEnum):
    """Where a run stands, from what was asked of it and its trials' states."""

    empty = "empty"  # no trials
    queued = "queued"  # trials pending, none running
    running = "running"  # some trial leased
    paused = "paused"  # no trial is leased until it is resumed (running ones finish)
    cancelled = "cancelled"  # no trial is leased again; pending ones cancelled
    stopped = "stopped"  # stopped early (abort, cost ceiling, interrupt) with trials unfinished
    finished = "finished"  # every trial has its final result


class InFlight(StrEnum):
    """What a cancel does to the trials running at the time."""

    finish = "finish"  # let them finish and record their results
    stop = "stop"  # stop them now; their leases are taken back


class Progress(BaseModel):
    done: int = Field(description="trials with a final result (done or infra_error)")
    total: int = Field(description="trials of the run, cancelled ones left out")
    fraction: float | None = Field(description="done / total; null for a run with no trials")


class Eta(BaseModel):
    seconds: float | None = Field(description="seconds until every trial is finished; null when unknown")
    reason: str | None = Field(
        description="why seconds is null (nothing finished yet, paused, cancelled, stopped)"
    )


class StopRecord(BaseModel):
    reason: str = Field(
        description="infra_error_rate, model_configuration, cost_ceiling, bad_spec, interrupted, cancelled"
    )
    detail: str | None = None
    at: datetime | None = None


class RunSummary(BaseModel):
    """One run of ``GET /runs``."""

    name: str
    state: RunState
    archived: bool = Field(description="archived runs are left out of the list unless asked for")
    counts: Counts = Field(description=COUNTS)
    created_at: datetime


class RunPage(BaseModel):
    """``GET /runs``: one page of runs, oldest first."""

    runs: list[RunSummary]
    total: int = Field(description="runs matching the filters, on every page")
    offset: int
    limit: int
    next_offset: int | None = Field(description="the offset of the next page; null on the last")


class RunStatus(BaseModel):
    """``GET /runs/{name}``."""

    name: str
    state: RunState
    archived: bool
    counts: Counts = Field(description=COUNTS)
    progress: Progress
    created_at: datetime = Field(description="when the run was first submitted")
    elapsed_s: float = Field(description="since it was submitted, until its last attempt once finished")
    eta: Eta = Field(description="from the rate at which its trials finished so far")
    cost_usd: float = Field(
        description="spent on its current trials so far, every attempt (accepted or not); "
        "tokens with no price count as 0 here (the report says unknown)"
    )
    concurrency: int | None = Field(
        description="the run-wide cap on trials in flight across every worker; null: none"
    )
    judge: JudgeIdentity | None = Field(description="who decides its verdicts; null: checks only")
    judge_id: str | None
    fingerprint: str | None = Field(description="of its identity document; null for a run recorded before")
    stop: StopRecord | None = Field(description="why it last stopped early, if it did")
    executor: str | None = Field(description="local, kubernetes or instant")
    artifacts: str | None = Field(description="artifact store URL of the run")


class TrialSummary(BaseModel):
    """One trial of ``GET /runs/{name}/trials``."""

    trial_id: str
    task_id: str
    agent: str
    model: str
    run_index: int
    state: TrialState
    outcome: Outcome | None = Field(description="null until it has a final result")
    score: float | None
    attempts: int
    updated_at: datetime


class TrialPage(BaseModel):
    """``GET /runs/{name}/trials``: one page, ordered by agent, task, run index, id."""

    trials: list[TrialSummary]
    total: int
    offset: int
    limit: int
    next_offset: int | None


class ArtifactLinks(BaseModel):
    """URIs of the trial's artifacts as recorded (file://, s3://, …); null when not written."""

    trajectory: str | None
    grade: str | None
    snapshot_before: str | None
    snapshot_after: str | None


class TrialDetail(TrialSummary):
    """``GET /runs/{name}/trials/{trial_id}``."""

    end_reason: str | None = Field(
        description="how the agent's run ended: completed, failed, max_steps, timeout, "
        "budget_exhausted, error, cancelled"
    )
    error: str | None
    duration_s: float | None
    cost_usd: float | None = Field(description="agent and judge, of the attempt recorded")
    judge_id: str | None
    finished_at: datetime | None
    verdicts: list[CriterionVerdict] = Field(description="the grade's verdicts, one per criterion")
    verdicts_problem: str | None = Field(description="why the verdicts could not be read, if so")
    artifacts: ArtifactLinks


class RunChange(BaseModel):
    """What a control verb (cancel, pause, resume, requeue, concurrency, archive) did."""

    name: str
    action: str = Field(description="cancel, pause, resume, requeue, concurrency or archive")
    state: RunState = Field(description="the run's state afterwards")
    trials_changed: int = Field(
        description="cancel: pending trials cancelled; resume: cancelled trials pending again; "
        "requeue: errored trials pending again; else 0"
    )
    stopped: int = Field(0, description="cancel with in_flight=stop: running trials stopped")
    counts: Counts = Field(description=COUNTS)


class CancelRequest(BaseModel):
    """``POST /runs/{name}/cancel``."""

    in_flight: InFlight = Field(InFlight.finish, description="what happens to the running trials")


class RunPatch(BaseModel):
    """``PATCH /runs/{name}``."""

    concurrency: int | None = Field(
        ge=1, le=100_000, description="cap on trials in flight across every worker; null removes it"
    )
