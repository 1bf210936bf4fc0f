"""Runs started over HTTP: start, poll, fetch the trajectory, cancel (no FastAPI here)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents_runner.checkpoint import CheckpointHandoff
from agents_runner.config import AgentConfig
from agents_runner.registry import AgentSpec
from agents_runner.runner import execute, prepare_run
from agents_runner.state import AgentRun
from atoll.agent_checkpoint import AgentCheckpoint, CheckpointPolicy
from atoll.benchmark import ReferenceSolution
from atoll.errors import AtollError, ErrorCode
from atoll.llm.admission import check_agent_request
from atoll.trajectory import Trajectory


class RunRequest(BaseModel):
    """Body of ``POST /runs``: the same inputs as :func:`agents_runner.run_agent`."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gateway_url: str
    gateway_token: str | None = Field(None, description="Bearer token of the gateway (never recorded)")
    prompt: str | None = None
    initial_messages: list[dict[str, Any]] | None = None
    agent: str = "react_toolbelt"
    config: AgentConfig | None = None
    api_base: str | None = None
    api_key: str | None = Field(
        None, description="refused: a key is never sent in a request (name a secret in api_key_secret)"
    )
    api_key_secret: str | None = Field(
        None, description="name of a secret provisioned on this service for api_base (docs/security.md)"
    )
    task_id: str | None = None
    trial_id: str | None = None
    reference_solution: ReferenceSolution | None = None
    max_steps: int | None = Field(None, ge=1)
    timeout_s: float | None = Field(None, gt=0)
    resume: AgentCheckpoint | None = Field(
        None, description="continue from this checkpoint of the same agent, model, task and trial"
    )
    attempt: int | None = Field(None, ge=1, description="the trial attempt, recorded with a resume")
    checkpoint: CheckpointPolicy | None = Field(
        None,
        description="take checkpoints by this policy: the run pauses at each until its caller takes it "
        "(GET /runs/{id}/checkpoint, then POST /runs/{id}/checkpoint/taken)",
    )
    checkpoint_wait_s: float = Field(
        300.0,
        gt=0,
        le=3600,
        description="how long a run paused at a checkpoint waits for its caller to take it; past "
        "that it ends (status error): its caller is gone",
    )


@dataclass
class _Entry:
    run_id: str
    spec: AgentSpec | None  # None once finished: only the trajectory is kept
    run: AgentRun | None
    task: asyncio.Task[Trajectory]
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    handoff: CheckpointHandoff | None = None  # a run that takes checkpoints: how they are handed over
    kept_bytes: int = 0  # the finished trajectory's JSON size


class RunManager:
    """Keeps the runs of one service process in memory: at most ``max_running`` running, and
    of the finished ones only their trajectories, the newest ``keep`` within ``keep_bytes``.

    A finished run's inputs (its request, context and agent state) are let go at once: a
    caller posting many large requests holds at most ``max_running`` of them plus the kept
    trajectories, never one copy per request it ever made.
    """

    def __init__(self, keep: int = 1000, *, max_running: int = 64, keep_bytes: int = 512 * 1024**2) -> None:
        self._runs: dict[str, _Entry] = {}
        self._keep = keep
        self._max_running = max_running
        self._keep_bytes = keep_bytes

    def start(self, request: RunRequest) -> str:
        """Start a run in the background; returns its id. Raises AtollError for bad input,
        for a request that would send this service's key elsewhere (naming the field), and
        (``too_many_runs``) while ``max_running`` runs are running."""
        running = sum(1 for entry in self._runs.values() if not entry.task.done())
        if running >= self._max_running:
            raise AtollError(
                ErrorCode.too_many_runs,
                f"{running} runs are running, this service's limit (ATOLL_AGENT_MAX_RUNNING); "
                "retry when one has finished",
            )
        check_agent_request(
            model=request.model,
            api_base=request.api_base,
            config_api_base=request.config.api_base if request.config else None,
            api_key=request.api_key,
            api_key_secret=request.api_key_secret,
            extra_args=request.config.extra_args if request.config else {},
        )
        handoff = CheckpointHandoff(request.checkpoint_wait_s) if request.checkpoint is not None else None
        spec, run = prepare_run(
            model=request.model,
            prompt=request.prompt,
            initial_messages=request.initial_messages,
            agent=request.agent,
            config=request.config,
            api_base=request.api_base,
            api_key_secret=request.api_key_secret,
            task_id=request.task_id,
            trial_id=request.trial_id,
            reference_solution=request.reference_solution,
            max_steps=request.max_steps,
            timeout_s=request.timeout_s,
            resume=request.resume,
            attempt=request.attempt,
            checkpoint=request.checkpoint,
            on_checkpoint=handoff,
        )
        run_id = uuid.uuid4().hex
        cancel = asyncio.Event()
        task = asyncio.create_task(
            execute(
                spec, run, gateway_url=request.gateway_url, gateway_token=request.gateway_token, cancel=cancel
            )
        )
        entry = _Entry(run_id=run_id, spec=spec, run=run, task=task, cancel=cancel, handoff=handoff)
        self._runs[run_id] = entry
        task.add_done_callback(lambda _task: self._finished(entry))
        self._forget_old()
        return run_id

    def _finished(self, entry: _Entry) -> None:
        """Let go of a finished run's inputs and state, keep its trajectory (sized once)."""
        entry.spec = entry.run = entry.handoff = None
        if not entry.task.cancelled() and entry.task.exception() is None:
            entry.kept_bytes = len(entry.task.result().model_dump_json())
        self._forget_old()

    def _entry(self, run_id: str) -> _Entry:
        try:
            return self._runs[run_id]
        except KeyError:
            raise AtollError(ErrorCode.unknown_run, f"no run {run_id!r}") from None

    def status(self, run_id: str) -> dict[str, Any]:
        """State (running|finished), run status when finished, steps, elapsed time, usage."""
        entry = self._entry(run_id)
        run = entry.run
        if entry.task.done() or run is None:
            trajectory = entry.task.result()
            return {
                "run_id": run_id,
                "agent": trajectory.agent,
                "model": trajectory.model,
                "task_id": trajectory.task_id,
                "trial_id": trajectory.trial_id,
                "state": "finished",
                "status": trajectory.status,
                "steps": trajectory.steps,
                "elapsed_s": trajectory.duration_s,
                "usage": trajectory.usage,
                "checkpoint_step": None,
            }
        client = run.model_client
        return {
            "run_id": run_id,
            "agent": run.agent,
            "model": run.model,
            "task_id": run.task_id,
            "trial_id": run.trial_id,
            "state": "running",
            "status": None,
            "steps": run.steps,
            "elapsed_s": round(run.elapsed_s, 3),
            "usage": (client.usage if client else None),
            "checkpoint_step": entry.handoff.pending.step
            if entry.handoff is not None and entry.handoff.pending is not None
            else None,
        }

    def trajectory(self, run_id: str, *, so_far: bool = False) -> Trajectory:
        """The finished run's trajectory; while it runs, with ``so_far`` the trajectory as it
        stands (status ``running``), else AtollError(run_running)."""
        entry = self._entry(run_id)
        if not entry.task.done():
            if so_far and entry.run is not None:
                return entry.run.so_far()
            raise AtollError(ErrorCode.run_running, f"run {run_id} is still running")
        return entry.task.result()

    async def offered_checkpoint(self, run_id: str, wait_s: float) -> AgentCheckpoint | None:
        """The checkpoint the run waits at to be taken, waiting up to ``wait_s`` for one; None
        when there is none (a run that takes no checkpoints, or has ended, has none)."""
        entry = self._entry(run_id)
        if entry.handoff is None or entry.task.done():
            return None
        return await entry.handoff.offered(wait_s, entry.task)

    def checkpoint_taken(self, run_id: str, step: int) -> None:
        """The caller took the run's checkpoint of ``step``: the run goes on. AtollError
        (``no_checkpoint_pending``) when the run does not wait at that checkpoint."""
        entry = self._entry(run_id)
        if entry.handoff is None:
            raise AtollError(
                ErrorCode.no_checkpoint_pending, f"run {run_id} takes no checkpoints (or has ended)"
            )
        entry.handoff.take(step)

    def cancel(self, run_id: str) -> None:
        self._entry(run_id).cancel.set()

    async def wait(self, run_id: str) -> Trajectory:
        return await self._entry(run_id).task

    async def shutdown(self) -> None:
        """Cancel every running run and wait for their trajectories."""
        for entry in self._runs.values():
            entry.cancel.set()
        await asyncio.gather(*(entry.task for entry in self._runs.values()), return_exceptions=True)

    def _forget_old(self) -> None:
        """Drop the oldest finished runs past ``keep`` runs or ``keep_bytes`` of trajectories."""
        finished = [run_id for run_id, entry in self._runs.items() if entry.task.done()]
        kept_bytes = sum(self._runs[run_id].kept_bytes for run_id in finished)
        for run_id in finished:
            if len(self._runs) <= self._keep and kept_bytes <= self._keep_bytes:
                break
            kept_bytes -= self._runs.pop(run_id).kept_bytes
