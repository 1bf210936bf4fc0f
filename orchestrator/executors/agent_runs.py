"""Where a trial's agent runs: in this process, or in the agents runner service over HTTP.

Both take the same checkpoint arguments (:mod:`orchestrator.executors.checkpoints`): a policy,
the ``on_checkpoint`` callback that snapshots the world while the agent waits, and an agent
checkpoint to resume from.

In process, the callback is the agent's own ``on_checkpoint``. Through the service
(``ATOLL_AGENTS_RUNNER_URL``) the run is started with the policy, and pauses at each checkpoint
until it is taken: between its status polls the executor asks for a checkpoint waiting
(``GET /runs/{id}/checkpoint?wait_s=``, which answers as soon as one is), calls the callback
with it, then says so (``POST /runs/{id}/checkpoint/taken``) and the run goes on. A resume is
sent in the run request; a runner that refuses it (400 ``bad_checkpoint``, or a request too large
for its ``ATOLL_AGENT_MAX_BODY_BYTES``) raises ``AtollError("bad_checkpoint")``, which the trial
answers by starting over (:mod:`orchestrator.executors.trial_phases`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx

from atoll.agent_checkpoint import AgentCheckpoint
from atoll.benchmark import Task
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import Trajectory
from atoll.trial import TrialSpec
from orchestrator.executors.base import InfraError
from orchestrator.executors.steps import EnvironmentEndpoint, agent_config

if TYPE_CHECKING:
    from agents_runner.state import AgentRun
    from atoll.experiment import Checkpoints

OnCheckpoint = Callable[[AgentCheckpoint], Awaitable[Any]]


async def run_agent_in_process(
    environment: EnvironmentEndpoint,
    task: Task,
    spec: TrialSpec,
    *,
    on_change: Callable[[AgentRun], None] | None = None,
    checkpoint: Checkpoints | None = None,
    on_checkpoint: OnCheckpoint | None = None,
    resume: AgentCheckpoint | None = None,
    attempt: int | None = None,
) -> Trajectory:
    """The agent runs in this process and reaches the world over the environment's /mcp;
    ``on_change`` sees the run after every message (for the trajectory so far); with
    ``checkpoint`` and ``on_checkpoint`` it takes checkpoints, with ``resume`` it continues
    from one (:mod:`orchestrator.executors.checkpoints`)."""
    from agents_runner import CheckpointPolicy, run_agent

    policy = (
        CheckpointPolicy(every_steps=checkpoint.every_steps, every_s=checkpoint.every_s)
        if checkpoint is not None and on_checkpoint is not None
        else None
    )

    return await run_agent(
        model=spec.model,
        gateway_url=environment.mcp_url,
        gateway_token=environment.mcp_token,
        prompt=task.prompt,
        api_base=spec.agent_config.get("api_base"),
        api_key_secret=spec.agent_config.get("api_key_secret"),
        agent=spec.agent,
        config=agent_config(spec),
        task_id=task.task_id,
        trial_id=spec.trial_id,
        reference_solution=task.reference_solution,
        on_change=on_change,
        checkpoint=policy,
        on_checkpoint=on_checkpoint if policy is not None else None,
        resume=resume,
        attempt=attempt,
    )


async def run_agent_remote(
    http: httpx.AsyncClient,
    agents_url: str,
    environment: EnvironmentEndpoint,
    task: Task,
    spec: TrialSpec,
    *,
    token: str | None = None,
    poll_s: float = 1.0,
    busy_wait_s: float = 600.0,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    checkpoint: Checkpoints | None = None,
    on_checkpoint: OnCheckpoint | None = None,
    resume: AgentCheckpoint | None = None,
    attempt: int | None = None,
    checkpoint_wait_s: float = 300.0,
) -> Trajectory:
    """The agent runs in the agents runner service (``POST /runs``, poll, fetch the trajectory).
    A runner at its limit of running runs (429) is asked again every ``poll_s`` for up to
    ``busy_wait_s`` before the trial counts it as an infrastructure error. ``on_trajectory``
    gets the trajectory so far (``?so_far=true``) whenever a poll finds a new step.

    With ``checkpoint`` and ``on_checkpoint`` the run takes checkpoints and waits at each until
    ``on_checkpoint`` returned (up to ``checkpoint_wait_s``, after which the runner ends it);
    with ``resume`` it continues from one. AtollError(bad_checkpoint) when the runner refuses
    the resume; every other failure is an InfraError."""
    base = agents_url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    takes_checkpoints = checkpoint is not None and on_checkpoint is not None
    body: dict[str, Any] = {
        "model": spec.model,
        "gateway_url": environment.mcp_url,
        "gateway_token": environment.mcp_token,
        "prompt": task.prompt,
        "agent": spec.agent,
        "config": agent_config(spec) or None,
        "api_base": spec.agent_config.get("api_base"),
        "api_key_secret": spec.agent_config.get("api_key_secret"),
        "task_id": task.task_id,
        "trial_id": spec.trial_id,
        "reference_solution": task.reference_solution.model_dump(mode="json")
        if task.reference_solution
        else None,
    }
    if takes_checkpoints:
        assert checkpoint is not None
        body["checkpoint"] = {"every_steps": checkpoint.every_steps, "every_s": checkpoint.every_s}
        body["checkpoint_wait_s"] = checkpoint_wait_s
    if resume is not None:
        body["resume"] = resume.model_dump(mode="json")
        body["attempt"] = attempt
    try:
        started = await http.post(f"{base}/runs", json=body, headers=headers)
        busy_until = time.monotonic() + busy_wait_s
        # 429 too_many_runs: the runner is at ATOLL_AGENT_MAX_RUNNING; wait for a free slot.
        while started.status_code == 429 and time.monotonic() < busy_until:
            await asyncio.sleep(poll_s)
            started = await http.post(f"{base}/runs", json=body, headers=headers)
        if resume is not None:
            _raise_for_refused_resume(started)
        if started.status_code >= 400:
            raise InfraError(f"agents runner /runs: HTTP {started.status_code}: {started.text[:300]}")
        run_id = started.json()["run_id"]
        seen_steps = 0
        while True:
            status = await http.get(f"{base}/runs/{run_id}", headers=headers)
            if status.status_code >= 400:
                raise InfraError(f"agents runner /runs/{run_id}: HTTP {status.status_code}")
            if status.json().get("state") == "finished":
                break
            steps = int(status.json().get("steps") or 0)
            if on_trajectory is not None and steps > seen_steps:
                so_far = await http.get(
                    f"{base}/runs/{run_id}/trajectory", params={"so_far": "true"}, headers=headers
                )
                if so_far.status_code == 200:  # an older runner answers 409: no progress then
                    seen_steps = steps
                    on_trajectory(Trajectory.model_validate(so_far.json()))
            if takes_checkpoints:
                assert on_checkpoint is not None
                # The wait between two polls: answered at once when a checkpoint waits.
                await _take_checkpoint(http, f"{base}/runs/{run_id}", headers, poll_s, on_checkpoint)
            else:
                await asyncio.sleep(poll_s)
        # With its raw model calls when the agent records them (record_raw), to store beside it.
        raw = {"raw": "true"} if spec.agent_config.get("record_raw") else None
        answer = await http.get(f"{base}/runs/{run_id}/trajectory", params=raw, headers=headers)
        if answer.status_code >= 400:
            raise InfraError(f"agents runner trajectory: HTTP {answer.status_code}")
    except httpx.HTTPError as exc:
        raise InfraError(f"agents runner at {agents_url}: {type(exc).__name__}: {exc}") from exc
    return Trajectory.model_validate(answer.json())


def _raise_for_refused_resume(started: httpx.Response) -> None:
    """AtollError(bad_checkpoint) when the runner refused the run because of its resume."""
    if started.status_code == 413:
        raise AtollError(
            ErrorCode.bad_checkpoint,
            f"the agents runner takes no request this large ({len(started.request.content)} bytes with the "
            "checkpoint): raise its ATOLL_AGENT_MAX_BODY_BYTES to resume long trials",
        )
    if started.status_code == 400:
        try:
            error = started.json().get("error") or {}
        except ValueError:
            return
        if error.get("code") == "bad_checkpoint":
            raise AtollError(ErrorCode.bad_checkpoint, f"the agents runner: {error.get('message')}")


async def _take_checkpoint(
    http: httpx.AsyncClient,
    run_url: str,
    headers: dict[str, str],
    wait_s: float,
    on_checkpoint: OnCheckpoint,
) -> None:
    """Wait up to ``wait_s`` for a checkpoint the run waits at; take it (``on_checkpoint``,
    while the run waits) and let the run go on."""
    offered = await http.get(f"{run_url}/checkpoint", params={"wait_s": wait_s}, headers=headers)
    if offered.status_code == 204:
        return
    if offered.status_code != 200:
        raise InfraError(
            f"agents runner {run_url}/checkpoint: HTTP {offered.status_code}: {offered.text[:300]}"
        )
    try:
        checkpoint = AgentCheckpoint.model_validate_json(offered.content)
    except ValueError as exc:
        raise InfraError(f"agents runner {run_url}/checkpoint: not a checkpoint: {exc}") from exc
    await on_checkpoint(checkpoint)
    taken = await http.post(f"{run_url}/checkpoint/taken", json={"step": checkpoint.step}, headers=headers)
    # 409: the run stopped waiting (cancelled, out of time); the next status poll says how it ended.
    if taken.status_code >= 400 and taken.status_code != 409:
        raise InfraError(f"agents runner {run_url}/checkpoint/taken: HTTP {taken.status_code}")


__all__ = ["OnCheckpoint", "run_agent_in_process", "run_agent_remote"]
