"""The state of one agent run and its conversion to a :class:`atoll.Trajectory`.

Two message lists are kept: ``context`` is what the model is sent (compacted by
summarisation), ``transcript`` is the full record that goes into the trajectory (every message
ever produced, the summaries included, images replaced by a note).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agents_runner.config import AgentConfig
from agents_runner.gateway import Gateway
from agents_runner.model import ModelClient
from atoll.benchmark import ReferenceSolution
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import (
    AgentReportedStatus,
    ErrorKind,
    Resume,
    RunStatus,
    ToolCall,
    Trajectory,
    TrajectoryError,
    Usage,
)

if TYPE_CHECKING:
    from atoll.agent_checkpoint import AgentCheckpoint, CheckpointPolicy

CheckpointCallback = Callable[["AgentCheckpoint"], Awaitable[None] | None]


class RunEnded(AtollError):
    """Raised inside an agent to end the run with ``status`` (and an error for ``error``)."""

    def __init__(
        self,
        status: RunStatus,
        message: str | None = None,
        *,
        kind: ErrorKind | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(ErrorCode(f"run_{status.value}"), message or status.value)
        self.status = status
        self.error = TrajectoryError(kind=kind, message=message, detail=detail) if kind and message else None
        self.message = message  # type: ignore[assignment]  # None: the status says it all

    def __str__(self) -> str:
        return self.message or self.status.value


@dataclass
class AgentRun:
    """Inputs and evolving state of one run; agents read and append to it."""

    agent: str
    model: str
    config: AgentConfig
    initial_messages: list[dict[str, Any]]
    model_client: ModelClient | None = None
    gateway: Gateway | None = None
    task_id: str | None = None
    trial_id: str | None = None
    reference_solution: ReferenceSolution | None = None
    # Called after every message the run appends (cheap: an observer that writes the
    # trajectory so far decides itself how often it calls :meth:`so_far`).
    on_change: Callable[[AgentRun], None] | None = None

    transcript: list[dict[str, Any]] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    final_answer: str | None = None
    reported_status: AgentReportedStatus | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)
    compactions: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _started_monotonic: float = field(default_factory=time.monotonic)

    # --- checkpoints and resume (agents_runner.checkpoint) --------------------------------
    checkpoint_policy: CheckpointPolicy | None = None
    on_checkpoint: CheckpointCallback | None = None
    #: The agent's own state a checkpoint carries, kept current by the agent at each step
    #: boundary (react_toolbelt: its toolbelt and counters; replay: the next reference step).
    agent_state: dict[str, Any] = field(default_factory=dict)
    #: True when the run continues from a checkpoint: the agent restores ``agent_state``
    #: instead of starting its context.
    resumed: bool = False
    resumes: list[Resume] = field(default_factory=list)
    #: Run time spent by earlier attempts (up to the checkpoint resumed from).
    elapsed_before_s: float = 0.0
    last_checkpoint_step: int = 0
    last_checkpoint_monotonic: float = field(default_factory=time.monotonic)

    # --- time ---------------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        """Run time spent, earlier attempts' included (what ``timeout_s`` limits)."""
        return self.elapsed_before_s + time.monotonic() - self._started_monotonic

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.config.timeout_s - self.elapsed_s)

    # --- messages -----------------------------------------------------------------------

    def add(self, message: dict[str, Any], *, record: dict[str, Any] | None = None) -> None:
        """Append ``message`` to the context and ``record`` (default: the same) to the transcript."""
        self.context.append(message)
        self.transcript.append(record if record is not None else message)
        if self.on_change is not None:
            self.on_change(self)

    def open_tool_call_ids(self) -> list[str]:
        """Ids of transcript tool calls that have no ``role: tool`` answer yet."""
        answered = {m.get("tool_call_id") for m in self.transcript if m.get("role") == "tool"}
        open_ids: list[str] = []
        for message in self.transcript:
            for call in message.get("tool_calls") or []:
                if call["id"] not in answered:
                    open_ids.append(call["id"])
        return open_ids

    # --- result -------------------------------------------------------------------------

    def so_far(self) -> Trajectory:
        """The trajectory as it stands, status ``running``, without touching the run: tool
        calls still executing have no ``role: tool`` answer yet."""
        return self._build(RunStatus.running, None, list(self.transcript), list(self.tool_calls))

    def trajectory(self, status: RunStatus, error: TrajectoryError | None = None) -> Trajectory:
        """The trajectory of this run as it stands, ending with ``status``.

        Tool calls left unanswered (the run stopped mid-turn) get a ``role: tool`` message: the
        recorded result of those that ran, else a note that they were not executed, so every
        ``tool_calls[].id`` is answered."""
        recorded = {call.id: call.result for call in self.tool_calls}
        for call_id in self.open_tool_call_ids():
            content = recorded.get(call_id, f"not executed: the run ended ({status.value})")
            self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": content})
        return self._build(status, error, self.transcript, self.tool_calls)

    def _build(
        self,
        status: RunStatus,
        error: TrajectoryError | None,
        messages: list[dict[str, Any]],
        tool_calls: list[ToolCall],
    ) -> Trajectory:
        client = self.model_client
        return Trajectory(
            trial_id=self.trial_id,
            task_id=self.task_id,
            agent=self.agent,
            model=self.model,
            agent_config=self.config.model_dump(mode="json"),
            status=status,
            agent_reported_status=self.reported_status,
            final_answer=self.final_answer,
            messages=messages,
            tool_calls=tool_calls,
            model_calls=list(client.calls) if client else [],
            usage=client.usage if client else Usage(),
            steps=self.steps,
            started_at=self.started_at,
            ended_at=datetime.now(UTC),
            error=error,
            compactions=self.compactions,
            todos=list(self.todos),
            retries=client.retry_budget.used if client else 0,
            resumes=list(self.resumes),
            raw_model_calls=list(client.raw.records) if client and client.raw else [],
        )
