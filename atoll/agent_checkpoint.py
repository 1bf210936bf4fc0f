"""Agent checkpoint contracts: the state an agent run needs to continue after a completed step.

An :class:`AgentCheckpoint` is taken at a step boundary (the step's tool results appended, the
next model call not yet made) and holds the model context exactly as it would be sent next
(provider state verbatim: thinking blocks with their signatures, Gemini thought signatures,
Responses reasoning items), the transcript, tool and model calls, usage and cost, the time
spent, and the agent's own state (``agent_state``: react_toolbelt's toolbelt, replay's position
in the reference solution). ``agents_runner.run_agent(resume=...)`` continues from it; a
checkpoint of another agent, model, task or trial, or of another format version, is refused
with ``AtollError("bad_checkpoint")`` (:func:`load_agent_checkpoint`, :func:`check_resumable`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.trajectory import AgentReportedStatus, ModelCall, Resume, ToolCall, Usage

AGENT_CHECKPOINT_VERSION = 1
"""The format version this code writes and reads; any other is refused (``bad_checkpoint``)."""


class CheckpointPolicy(BaseModel):
    """When a run takes a checkpoint: at the first step boundary after ``every_steps`` steps or
    ``every_s`` seconds since the last one (or the start), whichever comes first; a boundary with
    no new step since the last checkpoint takes none. ``None`` turns that trigger off."""

    model_config = ConfigDict(extra="forbid")

    every_steps: int | None = Field(default=None, ge=1)
    every_s: float | None = Field(default=None, gt=0)


class AgentCheckpoint(BaseModel):
    """Everything an agent run needs to continue where it was after step ``step``."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(
        default=AGENT_CHECKPOINT_VERSION,
        description="format version; a reader refuses any other (bad_checkpoint)",
    )
    agent: str
    model: str
    task_id: str | None = None
    trial_id: str | None = None
    step: int = Field(description="steps completed; the resumed run's next step is step + 1")
    taken_at: datetime
    started_at: datetime = Field(description="when the run (its first attempt) started")
    elapsed_s: float = Field(description="run time spent up to the checkpoint, counted against timeout_s")
    context: list[dict[str, Any]] = Field(
        description="the model context exactly as it is sent next (provider fields verbatim)"
    )
    transcript: list[dict[str, Any]] = Field(description="the trajectory's messages so far")
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model_calls: list[ModelCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    retries: int = Field(default=0, description="model-call retries used of the run's retry budget")
    todos: list[dict[str, Any]] = Field(default_factory=list)
    compactions: int = 0
    final_answer: str | None = None
    reported_status: AgentReportedStatus | None = None
    agent_state: dict[str, Any] = Field(
        default_factory=dict,
        description="the agent's own state (react_toolbelt: toolbelt, counters; replay: next_step)",
    )
    resumes: list[Resume] = Field(default_factory=list, description="earlier resumes of this run")

    @field_validator("version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if version != AGENT_CHECKPOINT_VERSION:
            raise ValueError(_version_message(version))
        return version


def _version_message(version: object) -> str:
    return f"checkpoint format version {version!r}; this runner reads version {AGENT_CHECKPOINT_VERSION}"


def load_agent_checkpoint(data: str | bytes | dict[str, Any] | AgentCheckpoint) -> AgentCheckpoint:
    """The checkpoint in ``data`` (JSON text or its parsed object); raises
    ``AtollError("bad_checkpoint")`` naming what is wrong when it cannot be read."""
    if isinstance(data, AgentCheckpoint):
        return data
    try:
        parsed = json.loads(data) if isinstance(data, (str, bytes)) else data
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AtollError(ErrorCode.bad_checkpoint, f"unreadable agent checkpoint: not JSON ({exc})") from exc
    if isinstance(parsed, dict) and parsed.get("version") != AGENT_CHECKPOINT_VERSION:
        # Another format's fields would only add noise: the version says it all.
        raise AtollError(
            ErrorCode.bad_checkpoint,
            f"unreadable agent checkpoint: {_version_message(parsed.get('version'))}",
        )
    try:
        return AgentCheckpoint.model_validate(parsed)
    except ValidationError as exc:
        raise AtollError(
            ErrorCode.bad_checkpoint, f"unreadable agent checkpoint: {describe_validation(exc)}"
        ) from exc


def check_resumable(
    checkpoint: AgentCheckpoint, *, agent: str, model: str, task_id: str | None, trial_id: str | None
) -> None:
    """Raise ``AtollError("bad_checkpoint")`` when ``checkpoint`` belongs to another run."""
    expected = {"agent": agent, "model": model, "task_id": task_id, "trial_id": trial_id}
    for name, value in expected.items():
        found = getattr(checkpoint, name)
        if found != value:
            raise AtollError(
                ErrorCode.bad_checkpoint,
                f"the checkpoint is of {name} {found!r}, this run's is {value!r}: it cannot be resumed here",
            )
