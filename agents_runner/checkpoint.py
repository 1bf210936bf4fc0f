"""Taking agent checkpoints at step boundaries and resuming a run from one.

A **step boundary** is the moment after a step's tool results are appended and before the next
model call (for ``replay``: before the next reference step). :func:`at_step_boundary` is called
there by every agent; when the run's :class:`~atoll.agent_checkpoint.CheckpointPolicy` says one
is due it takes an :class:`~atoll.agent_checkpoint.AgentCheckpoint` (:func:`capture`) and awaits
the run's ``on_checkpoint`` with it. The agent does nothing while the callback runs, so the
world behind the gateway is quiescent and the caller can snapshot it consistently with the
context; that time counts against the run's time limit, so the callback should take its
snapshot quickly and hand uploads and other heavy work off (a task, a thread). An exception
the callback raises ends the run (status ``error``).

The checkpoint shares nothing with the run: its messages are copies, so the caller may
serialise it on another thread while the agent goes on. :func:`resume_into` puts a checkpoint
back into a prepared run; the agent then continues from ``agent_state`` without making any model
call made before the checkpoint again.

:class:`CheckpointHandoff` is the ``on_checkpoint`` of a run started over HTTP (the service): the
run pauses at each checkpoint until its caller has taken it (snapshotted the world) and says so,
and ends when nobody does within ``wait_s``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from datetime import UTC, datetime
from typing import Any

import orjson

from agents_runner.state import AgentRun, RunEnded
from atoll.agent_checkpoint import AgentCheckpoint, check_resumable, load_agent_checkpoint
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import ErrorKind, Resume, RunStatus, Usage


def capture(run: AgentRun) -> AgentCheckpoint:
    """The run's checkpoint as it stands (call it at a step boundary only)."""
    client = run.model_client
    # One JSON round trip copies the messages deeply (they are JSON-native by construction)
    # and is several times faster than copy.deepcopy.
    copied: dict[str, Any] = orjson.loads(
        orjson.dumps(
            {
                "context": run.context,
                "transcript": run.transcript,
                "todos": run.todos,
                "agent_state": run.agent_state,
            }
        )
    )
    return AgentCheckpoint(
        agent=run.agent,
        model=run.model,
        task_id=run.task_id,
        trial_id=run.trial_id,
        step=run.steps,
        taken_at=datetime.now(UTC),
        started_at=run.started_at,
        elapsed_s=round(run.elapsed_s, 3),
        context=copied["context"],
        transcript=copied["transcript"],
        tool_calls=[call.model_copy(deep=True) for call in run.tool_calls],
        model_calls=[call.model_copy(deep=True) for call in client.calls] if client else [],
        usage=client.usage.model_copy() if client else Usage(),
        retries=client.retry_budget.used if client else 0,
        todos=copied["todos"],
        compactions=run.compactions,
        final_answer=run.final_answer,
        reported_status=run.reported_status,
        agent_state=copied["agent_state"],
        resumes=[resume.model_copy() for resume in run.resumes],
    )


async def at_step_boundary(run: AgentRun) -> None:
    """Take a checkpoint and hand it to ``run.on_checkpoint`` when the policy says one is due:
    ``every_steps`` steps or ``every_s`` seconds since the last one, and at least one new step."""
    policy = run.checkpoint_policy
    if policy is None or run.on_checkpoint is None or run.steps <= run.last_checkpoint_step:
        return
    now = time.monotonic()
    due_by_steps = (
        policy.every_steps is not None and run.steps - run.last_checkpoint_step >= policy.every_steps
    )
    due_by_time = policy.every_s is not None and now - run.last_checkpoint_monotonic >= policy.every_s
    if not (due_by_steps or due_by_time):
        return
    checkpoint = capture(run)
    run.last_checkpoint_step = run.steps
    run.last_checkpoint_monotonic = now
    outcome = run.on_checkpoint(checkpoint)
    if inspect.isawaitable(outcome):
        await outcome


def resume_into(
    run: AgentRun, checkpoint: AgentCheckpoint | str | bytes | dict[str, Any], *, attempt: int | None = None
) -> None:
    """Put ``checkpoint`` back into the prepared (not yet started) ``run`` and record the resume.

    Raises ``AtollError("bad_checkpoint")`` when the checkpoint cannot be read or belongs to
    another agent, model, task or trial."""
    checkpoint = load_agent_checkpoint(checkpoint)
    check_resumable(checkpoint, agent=run.agent, model=run.model, task_id=run.task_id, trial_id=run.trial_id)
    copied: dict[str, Any] = orjson.loads(
        orjson.dumps(
            {
                "context": checkpoint.context,
                "transcript": checkpoint.transcript,
                "todos": checkpoint.todos,
                "agent_state": checkpoint.agent_state,
            }
        )
    )
    run.context = copied["context"]
    run.transcript = copied["transcript"]
    run.todos = copied["todos"]
    run.agent_state = copied["agent_state"]
    run.tool_calls = [call.model_copy(deep=True) for call in checkpoint.tool_calls]
    run.steps = checkpoint.step
    run.compactions = checkpoint.compactions
    run.final_answer = checkpoint.final_answer
    run.reported_status = checkpoint.reported_status
    run.started_at = checkpoint.started_at
    run.elapsed_before_s = checkpoint.elapsed_s
    run.last_checkpoint_step = checkpoint.step
    run.resumed = True
    run.resumes = [
        *(resume.model_copy() for resume in checkpoint.resumes),
        Resume(
            from_step=checkpoint.step,
            at=datetime.now(UTC),
            checkpoint_taken_at=checkpoint.taken_at,
            elapsed_s=checkpoint.elapsed_s,
            attempt=attempt,
        ),
    ]
    if run.model_client is not None:
        run.model_client.restore(
            calls=[call.model_copy(deep=True) for call in checkpoint.model_calls],
            usage=checkpoint.usage.model_copy(),
            retries=checkpoint.retries,
            call_ids=_tool_call_ids(run.transcript) | _tool_call_ids(run.context),
        )
    if run.on_change is not None:  # a live view shows the steps made so far at once
        run.on_change(run)


def _tool_call_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {str(call.get("id")) for message in messages for call in message.get("tool_calls") or []}


class CheckpointHandoff:
    """A run's checkpoints handed to a caller that reaches the run over HTTP.

    Used as the run's ``on_checkpoint``: the checkpoint is offered (:meth:`offered`) and the run
    waits, so the world behind the gateway stays as the checkpoint has it, until the caller says
    it took it (:meth:`take`: it snapshotted the world). A checkpoint not taken within ``wait_s``
    ends the run with status ``error`` (infrastructure): its caller is gone, and an agent that
    went on would change a world nobody could checkpoint consistently again."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.pending: AgentCheckpoint | None = None
        self._offered = asyncio.Event()
        self._taken = asyncio.Event()

    async def __call__(self, checkpoint: AgentCheckpoint) -> None:
        self._taken.clear()
        self.pending = checkpoint
        self._offered.set()
        try:
            await asyncio.wait_for(self._taken.wait(), self.wait_s)
        except TimeoutError:
            raise RunEnded(
                RunStatus.error,
                f"the checkpoint of step {checkpoint.step} was not taken within {self.wait_s:g} s "
                "(checkpoint_wait_s): its caller is gone",
                kind=ErrorKind.infrastructure,
            ) from None
        finally:
            self.pending = None
            self._offered.clear()

    async def offered(self, wait_s: float, ended: asyncio.Future[Any]) -> AgentCheckpoint | None:
        """The checkpoint waiting to be taken, waiting up to ``wait_s`` for one (or until
        ``ended``, the run's task, is done); None when there is none."""
        if self.pending is None and wait_s > 0 and not ended.done():
            waiter = asyncio.ensure_future(self._offered.wait())
            try:
                await asyncio.wait({waiter, ended}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        return self.pending

    def take(self, step: int) -> None:
        """The caller took the checkpoint of ``step``: the run goes on. AtollError
        (``no_checkpoint_pending``) when the run is not waiting at that checkpoint (it went on
        already, or ended)."""
        if self.pending is None or self.pending.step != step:
            waiting = f"it waits at step {self.pending.step}" if self.pending else "none is waiting"
            raise AtollError(
                ErrorCode.no_checkpoint_pending,
                f"the run is not waiting for its checkpoint of step {step} ({waiting})",
            )
        self.pending = None  # never offered twice
        self._offered.clear()
        self._taken.set()
