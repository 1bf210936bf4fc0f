"""Trajectory contracts (DESIGN §5): what an agent run did, call by call."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from atoll.coworkers import CoworkerExchange


class RunStatus(StrEnum):
    """How a run ended, as seen by the harness (not by the agent)."""

    completed = "completed"  # the agent submitted a final answer
    failed = "failed"  # the agent gave up (final_answer status failed/blocked) or answered nothing
    max_steps = "max_steps"
    timeout = "timeout"
    budget_exhausted = "budget_exhausted"
    error = "error"  # see TrajectoryError.kind for whose error
    cancelled = "cancelled"
    running = "running"  # not an end: a trajectory so far, written while the run goes on


class AgentReportedStatus(StrEnum):
    """What the agent itself said about its work in ``final_answer``."""

    completed = "completed"
    blocked = "blocked"
    failed = "failed"


class ErrorKind(StrEnum):
    """Whose fault an error was; the orchestrator retries only ``infrastructure``."""

    infrastructure = "infrastructure"  # our machinery: gateway down, environment crash
    model_provider = "model_provider"  # the LLM API: auth, 4xx, exhausted retries on 429/5xx
    agent = "agent"  # the agent's own failure: malformed tool calls past the limit, etc.


class TrajectoryError(BaseModel):
    kind: ErrorKind
    message: str
    code: str | None = Field(
        default=None,
        description="the error's stable code when our machinery raised one (bad_checkpoint: the agent "
        "refused the checkpoint it was resumed from)",
    )
    detail: str | None = None
    model_error: str | None = Field(
        default=None,
        description="model_provider errors: the class of the failed model call (transient, rate_limited, "
        "configuration, context_window, content, cost_ceiling; see atoll.llm)",
    )


class Usage(BaseModel):
    """Token usage and cost, as the provider bills them; adds up with ``+``."""

    prompt_tokens: int = Field(default=0, description="input tokens, cached and cache-write tokens included")
    completion_tokens: int = Field(default=0, description="output tokens, reasoning tokens included")
    reasoning_tokens: int = Field(
        default=0,
        description="of completion_tokens, the reasoning (OpenAI reasoning_tokens, Gemini thoughtsTokenCount, "
        "Anthropic: litellm's count of the thinking text)",
    )
    cached_tokens: int = Field(
        default=0,
        description="of prompt_tokens, those read from the provider's prompt cache (OpenAI cached_tokens, "
        "Anthropic cache_read_input_tokens, Gemini cachedContentTokenCount)",
    )
    cache_write_tokens: int = Field(
        default=0,
        description="of prompt_tokens, those written to the prompt cache (Anthropic cache_creation_input_tokens)",
    )
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelCall(BaseModel):
    """One LLM request: its usage, latency and retries."""

    step: int
    model: str
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    retries: int = 0
    error: str | None = None


class ToolCall(BaseModel):
    """One tool call the agent made, with the result it saw."""

    id: str
    step: int
    name: str
    arguments: dict[str, Any] | str = Field(
        description="Parsed arguments; the raw string when the model sent malformed JSON"
    )
    result: str = Field(default="", description="The result text as the agent saw it (truncated)")
    is_error: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    error: str | None = None


class Resume(BaseModel):
    """One continuation of a run from an agent checkpoint (after its worker died)."""

    from_step: int = Field(description="the checkpoint's step: steps up to it were made before the resume")
    at: datetime = Field(description="when the run was resumed")
    checkpoint_taken_at: datetime
    elapsed_s: float = Field(
        description="run time spent before the checkpoint (counted against the time limit)"
    )
    attempt: int | None = Field(default=None, description="the trial attempt that resumed, when known")


class Trajectory(BaseModel):
    """Everything a run did. ``messages`` are OpenAI chat messages in which every
    ``tool_calls[].id`` is answered by exactly one ``role: tool`` message."""

    model_config = ConfigDict(extra="allow")

    schema_version: Literal[1] = 1
    trial_id: str | None = None
    task_id: str | None = None
    agent: str
    model: str
    agent_config: dict[str, Any] = Field(default_factory=dict)
    status: RunStatus
    agent_reported_status: AgentReportedStatus | None = None
    final_answer: str | None = None
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="OpenAI chat messages, every tool_calls[].id answered by one role: tool message. "
        "An assistant turn may also carry reasoning_content (the reasoning text the provider returned) "
        "and provider_fields: the provider state litellm returned with it (thinking_blocks with their "
        "signatures, reasoning_items, provider_specific_fields, and per tool call, aligned with "
        "tool_calls, its own provider fields such as a Gemini thought_signature), which a run seeded "
        "with these messages sends back unchanged",
    )
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model_calls: list[ModelCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    started_at: datetime
    ended_at: datetime
    error: TrajectoryError | None = None
    end_reason: str | None = Field(
        default=None,
        description="how the run ended, in words (max_steps=250 reached, final_answer called, …)",
    )
    resumes: list[Resume] = Field(
        default_factory=list,
        description="continuations from agent checkpoints, oldest first: steps up to from_step were made "
        "by earlier attempts (started_at is the first attempt's start)",
    )
    raw_model_calls: list[dict[str, Any]] = Field(
        default_factory=list,
        exclude=True,
        description="with record_raw: each model call's request as sent to litellm (no key) and its "
        "raw response, bounded per run; carried to whoever stores the trajectory and stored beside "
        "it as raw_model_calls.jsonl (raw_lines), never inside trajectory.json",
    )
    resume_refused: str | None = Field(
        default=None,
        description="why this attempt started over from the seed although its trial had a checkpoint "
        "(unreadable, or of another trial, agent, model or seed); set by the executor",
    )
    coworker_turns: list[CoworkerExchange] = Field(
        default_factory=list,
        description="the agent's messages to the world's personas and their replies, in order "
        "(docs/coworkers.md); set by the executor from the trial's final world",
    )
    coworker_usage: Usage = Field(
        default_factory=Usage,
        description="the coworker model's tokens and cost for those replies, counted apart from usage (the agent's)",
    )

    @property
    def duration_s(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()


# The file beside trajectory.json holding a run's raw model exchanges (record_raw).
RAW_MODEL_CALLS_NAME = "raw_model_calls.jsonl"


def raw_lines(records: list[dict[str, Any]]) -> bytes:
    """Raw model exchanges as stored: JSON Lines, one exchange a line."""
    return b"".join(json.dumps(record, ensure_ascii=False).encode() + b"\n" for record in records)
