"""Trial contracts (DESIGN §6): content-addressed work items and their outcomes."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from atoll.grade import UngradeableCode
from atoll.trajectory import ErrorKind, RunStatus

# Agent-config keys that never enter a trial's identity: secrets, endpoints and concurrency
# knobs change how a trial is run, not what it measures.
_NON_IDENTITY_KEYS = frozenset(
    {
        "api_key",
        "api_key_secret",
        "api_base",
        "base_url",
        "headers",
        "timeout",
        "concurrency",
        # What a trial records, not what it does: the same trial with or without its raw calls.
        "record_raw",
        "record_raw_max_bytes",
        "max_concurrency",
        "token",
    }
)


class Outcome(StrEnum):
    passed = "pass"
    failed = "fail"
    ungradeable = "ungradeable"
    infra_error = "infra_error"


class TrialState(StrEnum):
    """Lifecycle of a trial in the store."""

    pending = "pending"
    leased = "leased"
    done = "done"  # a final result exists (pass, fail or ungradeable)
    infra_error = "infra_error"  # retries exhausted; resume tries again
    cancelled = "cancelled"  # its run was cancelled before it finished; never leased again


class TrialSpec(BaseModel):
    """What to run: one agent on one task, run number ``run_index``."""

    experiment: str
    task_id: str
    world_id: str
    world_digest: str
    overlay_digest: str = ""
    agent_name: str
    agent: str
    model: str
    agent_config: dict[str, Any] = Field(default_factory=dict)
    run_index: int = Field(ge=0)
    domain: str = Field(default="", description="task domain, for reports; not part of the identity")

    @property
    def trial_id(self) -> str:
        return trial_id(self)


def identity_config(config: dict[str, Any]) -> dict[str, Any]:
    """The agent config as it enters the identity: secrets/endpoints/concurrency removed."""
    return {
        key: identity_config(value) if isinstance(value, dict) else value
        for key, value in sorted(config.items())
        if key not in _NON_IDENTITY_KEYS
    }


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def trial_id(spec: TrialSpec) -> str:
    """sha256 of the canonical JSON of what the trial measures (DESIGN §6)."""
    identity = {
        "task_id": spec.task_id,
        "world_digest": spec.world_digest,
        "overlay_digest": spec.overlay_digest,
        "agent_name": spec.agent_name,
        "agent": spec.agent,
        "model": spec.model,
        "agent_config": identity_config(spec.agent_config),
        "run_index": spec.run_index,
    }
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()


class TrialResult(BaseModel):
    """The final record of one trial attempt."""

    trial_id: str
    outcome: Outcome
    score: float | None = None
    checks_met: int | None = Field(
        default=None, description="criteria with a programmatic check that were met"
    )
    checks_total: int | None = Field(default=None, description="criteria with a programmatic check")
    check_disagreements: int | None = Field(
        default=None, description="criteria where the judge's verdict differs from its check's"
    )
    judge_id: str | None = Field(
        default=None,
        description="JudgeIdentity.id of the grading whose verdicts this result counts (None: "
        "recorded before atoll recorded it, or never graded)",
    )
    criteria_total: int | None = Field(default=None, description="criteria in the grade")
    criteria_ungradeable: int | None = Field(
        default=None,
        description="criteria the grade could not decide (in a failed trial they count as not met)",
    )
    run_status: RunStatus | None = Field(
        default=None, description="how the agent's run ended (None: it never ran)"
    )
    error: str | None = Field(
        default=None,
        description="what went wrong, led by its kind (``infrastructure: …``; an ungradeable trial's: "
        "``criterion-id: code: …; …``); see ``error_kind``",
    )
    attempt: int = 1
    steps: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = Field(default=0, description="the agent's: of completion_tokens, the reasoning")
    cached_tokens: int = Field(
        default=0, description="the agent's: of prompt_tokens, those read from the prompt cache"
    )
    cache_write_tokens: int = Field(
        default=0, description="the agent's: of prompt_tokens, those written to the prompt cache"
    )
    agent_cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_reasoning_tokens: int = Field(default=0, description="of judge_completion_tokens, the reasoning")
    judge_cached_tokens: int = Field(
        default=0, description="of judge_prompt_tokens, read from the prompt cache"
    )
    coworker_cost_usd: float = Field(
        default=0.0,
        description="the world's personas' model calls: their replies to the agent (docs/coworkers.md)",
    )
    coworker_prompt_tokens: int = 0
    coworker_completion_tokens: int = 0
    duration_s: float = 0.0
    trajectory_uri: str | None = None
    grade_uri: str | None = None
    snapshot_before_uri: str | None = None
    snapshot_after_uri: str | None = None
    finished_at: datetime | None = None

    @property
    def cost_usd(self) -> float:
        """What the trial cost in model calls: the agent's, the judge's and the personas'."""
        return self.agent_cost_usd + self.judge_cost_usd + self.coworker_cost_usd

    @property
    def error_kind(self) -> ErrorKind | UngradeableCode | str | None:
        """The kind this result's error is recorded under (:func:`error_kind`)."""
        return error_kind(self.error, self.outcome)


def short_reason(error: str | None) -> str:
    """An error without its per-criterion prefix, short enough to group by."""
    if not error:
        return "no reason recorded"
    first = error.split("; ")[0]
    return (first.split(": ", 1)[1] if ": " in first else first)[:160]


_HARNESS_KINDS = frozenset(kind.value for kind in ErrorKind)
_UNGRADEABLE_CODES = frozenset(code.value for code in UngradeableCode)


def error_kind(error: str | None, outcome: Outcome | None = None) -> ErrorKind | UngradeableCode | str | None:
    """The kind an error is recorded under: the word that leads it (``infrastructure: …``,
    ``model_provider: …``, an exception's type for our own bug); for an ungradeable trial,
    whose error starts with a criterion id, the code after it (``judge_unavailable``); None
    when the error has no such word.

    The one rule for a trial's error kind: report.json's trial rows and failure groups and the
    viewer's trial table all read it (through :attr:`TrialResult.error_kind`). The harness's own
    kinds come back as :class:`atoll.trajectory.ErrorKind` members and the grader's reasons for
    an ungradeable criterion as :class:`atoll.grade.UngradeableCode` members; the rest are an
    open set of strings: an :class:`atoll.errors.ErrorCode` value or an exception's class name.
    Either way the kind equals the word as written, so report.json reads the same."""
    if not error:
        return None
    text = short_reason(error) if outcome is Outcome.ungradeable else error
    head = text.split(":", 1)[0].strip() if ":" in text else ""
    if not head or " " in head or len(head) >= 40:
        return None
    if head in _HARNESS_KINDS:
        return ErrorKind(head)
    if outcome is Outcome.ungradeable and head in _UNGRADEABLE_CODES:
        return UngradeableCode(head)
    return head
