"""``run_agent``: run one agent on one task against an MCP gateway, return its trajectory.

The run always yields a trajectory, whatever happens: the status says how it ended
(``completed | failed | max_steps | timeout | budget_exhausted | error | cancelled``), the error
kind whose fault an error was (``infrastructure`` = our machinery or the gateway,
``model_provider`` = the LLM API, ``agent`` = the agent's own failure), and the agent's own
``final_answer`` status is kept apart in ``agent_reported_status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Callable
from typing import Any

from agents_runner.checkpoint import resume_into
from agents_runner.config import AgentConfig, load_agent_config
from agents_runner.gateway import Gateway, GatewayUnavailable
from agents_runner.model import BudgetExhausted, ModelClient, ModelProviderError
from agents_runner.registry import AgentSpec, get_agent
from agents_runner.state import AgentRun, CheckpointCallback, RunEnded
from atoll import telemetry
from atoll.agent_checkpoint import AgentCheckpoint, CheckpointPolicy
from atoll.benchmark import ReferenceSolution
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import ErrorKind, RunStatus, Trajectory, TrajectoryError


def prepare_run(
    *,
    model: str,
    prompt: str | None = None,
    initial_messages: list[dict[str, Any]] | None = None,
    agent: str = "react_toolbelt",
    config: AgentConfig | dict[str, Any] | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    api_key_secret: str | None = None,
    task_id: str | None = None,
    trial_id: str | None = None,
    reference_solution: ReferenceSolution | None = None,
    max_steps: int | None = None,
    timeout_s: float | None = None,
    on_change: Callable[[AgentRun], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
    on_checkpoint: CheckpointCallback | None = None,
    resume: AgentCheckpoint | None = None,
    attempt: int | None = None,
) -> tuple[AgentSpec, AgentRun]:
    """Validate the inputs and build the run (nothing is called yet).

    ``on_change`` is called with the run after every message it appends (see
    :meth:`AgentRun.so_far` for the trajectory so far). ``checkpoint``/``on_checkpoint``,
    ``resume`` and ``attempt``: see :func:`run_agent`.

    Raises AtollError for user mistakes: unknown agent, no prompt, replay without a solution,
    and ``bad_checkpoint`` for a ``resume`` of another agent, model, task or trial."""
    spec = get_agent(agent)
    # Options given as a mapping are validated with the agent's own options model.
    agent_config = (
        spec.options.model_validate(config) if isinstance(config, dict) else load_agent_config(config)
    )
    overrides = {key: value for key, value in (("max_steps", max_steps), ("timeout_s", timeout_s)) if value}
    if overrides:
        agent_config = agent_config.model_copy(update=overrides)
    messages = [dict(message) for message in initial_messages or []]
    if prompt:
        messages.append({"role": "user", "content": prompt})
    if not any(message.get("role") == "user" for message in messages):
        raise AtollError(
            ErrorCode.no_prompt, "the run has no task: give a prompt or initial messages with a user message"
        )
    if spec.needs_reference_solution and reference_solution is None:
        raise AtollError(
            ErrorCode.no_reference_solution,
            f"agent {spec.name} replays a reference solution; task {task_id or '(prompt)'} has no reference_solution",
        )
    run = AgentRun(
        agent=spec.name,
        model=model,
        config=agent_config,
        initial_messages=messages,
        task_id=task_id,
        trial_id=trial_id,
        reference_solution=reference_solution,
        on_change=on_change,
        checkpoint_policy=checkpoint,
        on_checkpoint=on_checkpoint,
    )
    if spec.uses_model:
        endpoint = api_base or agent_config.api_base
        run.model_client = ModelClient(
            model, agent_config, api_base=endpoint, api_key=api_key, api_key_secret=api_key_secret
        )
    if resume is not None:
        resume_into(run, resume, attempt=attempt)
    return spec, run


async def execute(
    spec: AgentSpec,
    run: AgentRun,
    *,
    gateway_url: str | None,
    gateway_token: str | None = None,
    cancel: asyncio.Event | None = None,
) -> Trajectory:
    """Run a prepared run to its end (or its time limit, or ``cancel``) and return the trajectory.

    Cancelling the task that awaits this re-raises after stopping the agent; use ``cancel`` to
    get a ``cancelled`` trajectory instead.

    With traces on (:mod:`atoll.telemetry`) the run is one ``invoke_agent {agent}`` span, parent
    of its model calls and tool calls."""
    if not telemetry.ENABLED:
        return await _execute(spec, run, gateway_url, gateway_token, cancel)
    with telemetry.agent_span(
        agent=spec.name, model=run.model, trial_id=run.trial_id, task_id=run.task_id
    ) as current:
        trajectory = await _execute(spec, run, gateway_url, gateway_token, cancel)
        telemetry.set_attributes(
            current,
            {
                "gen_ai.usage.input_tokens": trajectory.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": trajectory.usage.completion_tokens,
                "atoll.status": trajectory.status.value,
                "atoll.steps": trajectory.steps,
            },
        )
        if trajectory.error is not None:
            telemetry.mark_error(current, trajectory.error.kind.value, trajectory.error.message)
        return trajectory


async def _execute(
    spec: AgentSpec,
    run: AgentRun,
    gateway_url: str | None,
    gateway_token: str | None,
    cancel: asyncio.Event | None,
) -> Trajectory:
    body = asyncio.create_task(_body(spec, run, gateway_url, gateway_token), name=f"agent-{spec.name}")
    waiters: set[asyncio.Task[Any]] = {body}
    cancel_waiter = asyncio.create_task(cancel.wait()) if cancel is not None else None
    if cancel_waiter is not None:
        waiters.add(cancel_waiter)
    try:
        done, _ = await asyncio.wait(waiters, timeout=run.remaining_s, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _stop(body)
        raise
    finally:
        if cancel_waiter is not None:
            cancel_waiter.cancel()
    if body in done:
        status, error, reason = body.result()
    else:
        await _stop(body)
        if cancel is not None and cancel.is_set():
            status, error, reason = RunStatus.cancelled, None, "cancelled on request"
        else:
            status, error = RunStatus.timeout, None
            reason = f"wall-clock limit of {run.config.timeout_s:g} s reached"
    trajectory = run.trajectory(status, error)
    trajectory.end_reason = reason
    return trajectory


async def run_agent(
    *,
    model: str,
    gateway_url: str | None,
    prompt: str | None = None,
    initial_messages: list[dict[str, Any]] | None = None,
    gateway_token: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    api_key_secret: str | None = None,
    agent: str = "react_toolbelt",
    config: AgentConfig | dict[str, Any] | None = None,
    task_id: str | None = None,
    trial_id: str | None = None,
    reference_solution: ReferenceSolution | None = None,
    max_steps: int | None = None,
    timeout_s: float | None = None,
    cancel: asyncio.Event | None = None,
    on_change: Callable[[AgentRun], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
    on_checkpoint: CheckpointCallback | None = None,
    resume: AgentCheckpoint | None = None,
    attempt: int | None = None,
) -> Trajectory:
    """Run ``agent`` with ``model`` on the task (``prompt`` and/or ``initial_messages``) against the
    MCP gateway at ``gateway_url`` and return the trajectory (never raises for run failures).

    ``api_key`` is the caller's own key for the endpoint; ``api_key_secret`` names a secret
    the operator provisioned for it (atoll.llm.endpoints decides what each call sends).
    ``max_steps``/``timeout_s`` override the config's limits.  ``reference_solution`` is what the
    ``replay`` agent replays.  ``on_change`` is called with the run after every message it
    appends (its :meth:`~AgentRun.so_far` is the trajectory so far).

    Checkpoints: with ``checkpoint`` (a :class:`CheckpointPolicy`) and ``on_checkpoint``, an
    :class:`AgentCheckpoint` is taken at the first step boundary after ``every_steps`` steps or
    ``every_s`` seconds since the last one, and ``on_checkpoint`` is called (and awaited) with it
    while the agent waits: snapshot the world then, quickly, and hand heavy work off (its time
    counts against the time limit; an exception it raises ends the run with ``error``).
    ``resume`` continues from a checkpoint of this same agent, model, task and trial: no model
    call made before it is made again, steps, usage and cost continue from it, the time limit
    counts the time it had spent, and ``trajectory.resumes`` records it (with ``attempt``).

    Raises :class:`AtollError` only for invalid inputs (unknown agent, no task, replay without a
    reference solution, ``bad_checkpoint``: a ``resume`` that is unreadable or of another run)
    and ``pydantic.ValidationError`` for a bad config."""
    spec, run = prepare_run(
        model=model,
        prompt=prompt,
        initial_messages=initial_messages,
        agent=agent,
        config=config,
        api_base=api_base,
        api_key=api_key,
        api_key_secret=api_key_secret,
        task_id=task_id,
        trial_id=trial_id,
        reference_solution=reference_solution,
        max_steps=max_steps,
        timeout_s=timeout_s,
        on_change=on_change,
        checkpoint=checkpoint,
        on_checkpoint=on_checkpoint,
        resume=resume,
        attempt=attempt,
    )
    return await execute(spec, run, gateway_url=gateway_url, gateway_token=gateway_token, cancel=cancel)


async def _body(
    spec: AgentSpec, run: AgentRun, gateway_url: str | None, gateway_token: str | None
) -> tuple[RunStatus, TrajectoryError | None, str]:
    """Run the agent and map every way it can end to (status, error, reason)."""
    try:
        if gateway_url:
            async with Gateway(gateway_url, gateway_token) as gateway:
                run.gateway = gateway
                status = await spec.run(run)
        else:
            status = await spec.run(run)
        return status, None, "final answer submitted" if run.final_answer is not None else "no final answer"
    except RunEnded as ended:
        return ended.status, ended.error, ended.message or ended.status.value
    except BudgetExhausted as exc:
        return RunStatus.budget_exhausted, None, str(exc)
    except ModelProviderError as exc:
        error = TrajectoryError(kind=ErrorKind.model_provider, message=str(exc), model_error=exc.kind.value)
        return RunStatus.error, error, str(exc)
    except GatewayUnavailable as exc:
        return RunStatus.error, TrajectoryError(kind=ErrorKind.infrastructure, message=str(exc)), str(exc)
    except AtollError as exc:
        error = TrajectoryError(
            kind=ErrorKind.infrastructure, message=f"{exc.code}: {exc.message}", code=exc.code
        )
        return RunStatus.error, error, exc.message
    except Exception as exc:  # our own bug: keep the traceback for whoever debugs it
        message = f"agent runner crashed: {type(exc).__name__}: {exc}"
        error = TrajectoryError(kind=ErrorKind.infrastructure, message=message, detail=traceback.format_exc())
        return RunStatus.error, error, message
    finally:
        run.gateway = None


_STOP_GRACE_S = 10.0


async def _stop(task: asyncio.Task[Any]) -> None:
    """Cancel the agent and give it a moment to close its gateway session; never hang on it."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=_STOP_GRACE_S)
    if done:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            task.result()
