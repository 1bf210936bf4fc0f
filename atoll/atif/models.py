"""ATIF (Harbor's Agent Trajectory Interchange Format) as pydantic models, written from the
published schema (Harbor's RFC 0001 and its ``harbor.models.trajectories`` package).

atoll writes ``ATIF-v1.7`` and reads every version up to ``ATIF-v1.8``. Like Harbor's own
models, every object refuses keys the schema does not define (custom data goes in ``extra``),
step ids run 1, 2, 3 …, only agent steps carry model, reasoning, tool calls and metrics, and an
observation result's ``source_call_id`` names a tool call of its own step.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ATIF_VERSION = "ATIF-v1.7"
"""The version atoll writes."""

READABLE_VERSIONS = (
    "ATIF-v1.0",
    "ATIF-v1.1",
    "ATIF-v1.2",
    "ATIF-v1.3",
    "ATIF-v1.4",
    "ATIF-v1.5",
    "ATIF-v1.6",
    "ATIF-v1.7",
    "ATIF-v1.8",
)

_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(_Strict):
    """The agent system that produced the trajectory."""

    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = Field(
        default=None, description="the tools offered, in OpenAI's function-calling schema"
    )
    extra: dict[str, Any] | None = None


class AtifImageSource(_Strict):
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    path: str = Field(description="a file path (relative to the trajectory) or a URL")


class AtifAudioSource(_Strict):
    """ATIF-v1.8: read, never written."""

    media_type: str
    path: str
    duration_sec: float | None = Field(default=None, ge=0)


class AtifContentPart(_Strict):
    """One part of a multimodal message or observation (ATIF-v1.6)."""

    type: Literal["text", "image", "audio"]
    text: str | None = None
    source: AtifImageSource | AtifAudioSource | None = None

    @model_validator(mode="after")
    def _fields_of_type(self) -> AtifContentPart:
        if self.type == "text" and (self.text is None or self.source is not None):
            raise ValueError("a text part needs 'text' and no 'source'")
        if self.type != "text" and (self.source is None or self.text is not None):
            raise ValueError(f"an {self.type} part needs 'source' and no 'text'")
        return self


class AtifToolCall(_Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any] = Field(description="the arguments (an empty object when none)")
    extra: dict[str, Any] | None = None


class AtifSubagentTrajectoryRef(_Strict):
    trajectory_id: str | None = None
    session_id: str | None = None
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _resolvable(self) -> AtifSubagentTrajectoryRef:
        if self.trajectory_id is None and self.trajectory_path is None:
            raise ValueError("a subagent reference needs trajectory_id or trajectory_path")
        return self


class AtifObservationResult(_Strict):
    source_call_id: str | None = Field(
        default=None, description="the tool call of the same step this result answers"
    )
    content: str | list[AtifContentPart] | None = None
    subagent_trajectory_ref: list[AtifSubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None


class AtifObservation(_Strict):
    results: list[AtifObservationResult]


class AtifMetrics(_Strict):
    """One step's model usage: ``prompt_tokens`` include the cached ones."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class AtifFinalMetrics(_Strict):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class AtifStep(_Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = Field(default=None, description="ISO 8601")
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[AtifContentPart]
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso_timestamp(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError as exc:
                raise ValueError(f"timestamp {value!r} is not ISO 8601: {exc}") from None
        return value

    @model_validator(mode="after")
    def _agent_only_fields(self) -> AtifStep:
        if self.source != "agent":
            present = [name for name in _AGENT_ONLY if getattr(self, name) is not None]
            if present:
                raise ValueError(
                    f"{', '.join(present)}: only an agent step may carry it, not a {self.source} step"
                )
        llm_fields = self.metrics is not None or self.reasoning_content is not None
        if self.source == "agent" and self.llm_call_count == 0 and llm_fields:
            raise ValueError("a step with llm_call_count 0 carries no metrics and no reasoning_content")
        return self


class AtifTrajectory(_Strict):
    """A whole ATIF trajectory."""

    schema_version: Literal[READABLE_VERSIONS] = ATIF_VERSION  # type: ignore[valid-type]
    session_id: str | None = None
    trajectory_id: str | None = None
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[AtifTrajectory] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AtifTrajectory:
        for index, step in enumerate(self.steps):
            if step.step_id != index + 1:
                raise ValueError(f"steps[{index}].step_id is {step.step_id}, expected {index + 1}")
            if step.observation is None:
                continue
            own = {call.tool_call_id for call in step.tool_calls or []}
            for result in step.observation.results:
                if result.source_call_id is not None and result.source_call_id not in own:
                    raise ValueError(
                        f"step {step.step_id}: observation answers {result.source_call_id!r}, "
                        "which is not one of the step's tool calls"
                    )
        ids = [sub.trajectory_id for sub in self.subagent_trajectories or []]
        if any(value is None for value in ids) or len(set(ids)) != len(ids):
            raise ValueError("every embedded subagent trajectory needs its own unique trajectory_id")
        return self


def is_atif(data: Any) -> bool:
    """Whether JSON ``data`` claims to be an ATIF trajectory (by its ``schema_version``)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("schema_version"), str)
        and data["schema_version"].startswith("ATIF-")
    )
