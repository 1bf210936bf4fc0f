"""What a running attempt has done so far, and what a failed attempt keeps.

:class:`TrialProgress` follows one attempt from its start: it lists itself in
:func:`in_flight` (steps and elapsed time, for ``atoll run``'s progress line), writes the
trajectory so far to the attempt's folder as ``trajectory.json`` (status ``running``) while
the agent works — at most once per step and once per ``WRITE_EVERY_S``, whichever is rarer,
replaced atomically (:meth:`ArtifactStore.put_bytes`) — and, when the attempt fails on our
side, :meth:`TrialProgress.keep_evidence` stores what it has (the turns made, the prompt, the
final snapshot if one was taken) and gives the ``infra_error`` TrialResult that points at
it, with its duration and error. The finished trajectory replaces the one so far under the
same name, so a reader of the folder always finds the latest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from atoll.benchmark import Task
from atoll.jsonio import model_json
from atoll.trajectory import ErrorKind, RunStatus, Trajectory, TrajectoryError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore, find_trial_folder

if TYPE_CHECKING:
    from agents_runner.state import AgentRun

log = logging.getLogger("atoll.orchestrator")

TRAJECTORY_NAME = "trajectory.json"
ATIF_NAME = "atif.json"  # the finished trajectory again, as ATIF (atoll.atif; docs/interop.md)
AFTER_NAME = "after.delta.tar.gz"  # a trial's final state: a delta on its seed (atoll.world_manifest)
FULL_AFTER_NAME = "after.tar.gz"  # or its full snapshot, when no manifest can list it
WRITE_EVERY_S = 1.0  # the trajectory so far is written at most this often (and once per step)

_IN_FLIGHT: dict[tuple[str, int], TrialProgress] = {}


def in_flight() -> list[TrialProgress]:
    """The attempts running in this process, oldest first."""
    return sorted(_IN_FLIGHT.values(), key=lambda progress: progress.started)


class TrialProgress:
    """One running attempt of ``spec``: its steps so far and where its trajectory so far goes."""

    def __init__(self, spec: TrialSpec, task: Task, attempt: int, *, every_s: float = WRITE_EVERY_S) -> None:
        self.spec, self.task, self.attempt = spec, task, attempt
        self.every_s = every_s
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        # put(name, data) -> URI: writes one file of the attempt's folder (atomically replaced),
        # from bytes or from a local file.
        self.put: Callable[[str, bytes | Path], str] | None = None
        self.trajectory: Trajectory | None = None  # the agent's own, once it returned
        self.after: Path | None = None  # the final state (a delta), once taken
        # The initial snapshot's URI (storing it if need be), once the world was populated.
        self.before_uri: Callable[[], str] | None = None
        self._run: AgentRun | None = None
        self._remote: Trajectory | None = None  # the latest trajectory so far of a remote runner
        self._written_steps = 0
        self._written_at = float("-inf")
        self._writing: asyncio.Future | None = None
        self._stopped = False
        _IN_FLIGHT[(spec.trial_id, attempt)] = self

    @property
    def steps(self) -> int:
        if self.trajectory is not None:
            return self.trajectory.steps
        if self._run is not None:
            return self._run.steps
        return self._remote.steps if self._remote is not None else 0

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def attach(self, put: Callable[[str, bytes | Path], str]) -> None:
        """Write the trajectory so far (and a failure's evidence) with ``put(name, data) -> URI``,
        which writes one file of the attempt's claimed folder, replacing it atomically."""
        self.put = put

    def restart(self) -> None:
        """The agent starts over (it refused the checkpoint it resumed from): its steps so far
        count from nothing again."""
        self._run = self._remote = None
        self._written_steps = 0

    def observe(self, run: AgentRun) -> None:
        """The in-process agent's ``on_change``: :meth:`_offer` its trajectory so far."""
        self._run = run
        self._offer(run.steps, run.so_far)

    def observe_trajectory(self, trajectory: Trajectory) -> None:
        """A remote agents runner's trajectory so far, as the executor polled it."""
        self._remote = trajectory
        self._offer(trajectory.steps, lambda: trajectory)

    def _offer(self, steps: int, so_far: Callable[[], Trajectory]) -> None:
        """Write the trajectory so far when a new step began and ``every_s`` passed since the
        last write (never two writes at once)."""
        if (
            self._stopped
            or self.put is None
            or steps <= self._written_steps
            or time.monotonic() - self._written_at < self.every_s
            or (self._writing is not None and not self._writing.done())
        ):
            return
        self._written_steps, self._written_at = steps, time.monotonic()
        # Serialised here, on the agent's loop, so the copy is consistent; written off it.
        data = model_json(so_far(), indent=2).encode()
        self._writing = asyncio.ensure_future(asyncio.to_thread(self._put, data))

    def _put(self, data: bytes) -> None:
        assert self.put is not None
        try:
            self.put(TRAJECTORY_NAME, data)
        except Exception as exc:  # progress is a convenience: never fail the trial for it
            log.warning("trial %s: could not write its trajectory so far: %s", self.spec.trial_id[:12], exc)

    async def stop(self) -> None:
        """No more writes of the trajectory so far; waits for the one in flight (so it cannot
        land over the final trajectory)."""
        self._stopped = True
        if self._writing is not None:
            await asyncio.wait([self._writing])

    async def close(self) -> None:
        await self.stop()
        _IN_FLIGHT.pop((self.spec.trial_id, self.attempt), None)

    def so_far(self, error: str) -> Trajectory:
        """The attempt's trajectory for the record of its failure: the agent's own when it
        returned one, else the turns made so far (or just the prompt, when the agent never
        started) ending ``error`` with the infrastructure error."""
        if self.trajectory is not None:
            return self.trajectory
        if self._run is not None:
            trajectory = self._run.so_far()
        elif self._remote is not None:
            trajectory = self._remote
        else:
            trajectory = Trajectory(
                trial_id=self.spec.trial_id,
                task_id=self.spec.task_id,
                agent=self.spec.agent,
                model=self.spec.model,
                status=RunStatus.running,
                messages=[{"role": "user", "content": self.task.prompt}],
                started_at=self.started_at,
                ended_at=self.started_at,
            )
        return _ended(trajectory, error)

    def keep_evidence(self, error: str) -> TrialResult | None:
        """Store what the failed attempt has (trajectory so far, final snapshot when taken,
        with the seed's initial one) and return its ``infra_error`` result pointing at them;
        None when it has no folder yet or the store fails too (logged: the error itself is
        what matters then). Call :meth:`stop` first."""
        if self.put is None:
            return None
        trajectory = self.so_far(error)
        try:
            uris: dict[str, str | None] = {
                "trajectory_uri": self.put(TRAJECTORY_NAME, model_json(trajectory, indent=2).encode())
            }
            if self.after is not None and self.before_uri is not None:
                uris["snapshot_after_uri"] = self.put(self.after.name, self.after)
                uris["snapshot_before_uri"] = self.before_uri()
        except Exception as exc:
            log.warning(
                "trial %s: could not keep the failed attempt's evidence: %s", self.spec.trial_id[:12], exc
            )
            return None
        return _infra_result(self.spec, self.task, trajectory, self.attempt, self.elapsed_s, uris, error)


def _ended(trajectory: Trajectory, error: str) -> Trajectory:
    """A trajectory so far, ended by the infrastructure error ``error``."""
    return trajectory.model_copy(
        update={
            "status": RunStatus.error,
            "error": TrajectoryError(kind=ErrorKind.infrastructure, message=error),
            "ended_at": datetime.now(UTC),
            "end_reason": f"the attempt failed: {error}",
        }
    )


def _infra_result(
    spec: TrialSpec,
    task: Task,
    trajectory: Trajectory,
    attempt: int,
    duration_s: float,
    uris: dict[str, str | None],
    error: str,
) -> TrialResult:
    from orchestrator.executors import steps

    result = steps.build_result(
        spec, task, trajectory, None, attempt=attempt, duration_s=duration_s, uris=uris
    )
    return result.model_copy(update={"outcome": Outcome.infra_error, "score": None, "error": error})


def evidence_in_folder(
    artifacts: ArtifactStore, spec: TrialSpec, task: Task, attempt: int, error: str, duration_s: float
) -> TrialResult | None:
    """The ``infra_error`` result of an attempt that died without a word (a trial pod deleted
    or killed mid-trial) from the trajectory so far it left in its folder, now ended with
    ``error``; None when it left none or it cannot be read (logged)."""
    folder = find_trial_folder(artifacts, spec, attempt)
    key = f"{folder}/{TRAJECTORY_NAME}"
    try:
        if folder is None or not artifacts.exists(key):
            return None
        trajectory = Trajectory.model_validate_json(artifacts.get_bytes(key))
        if trajectory.status is RunStatus.running:
            trajectory = _ended(trajectory, error)
            artifacts.put_bytes(key, model_json(trajectory, indent=2).encode())
    except (OSError, ValueError) as exc:
        log.warning("trial %s: could not read its trajectory so far: %s", spec.trial_id[:12], exc)
        return None
    uris: dict[str, str | None] = {"trajectory_uri": artifacts.uri(key)}
    return _infra_result(spec, task, trajectory, attempt, duration_s, uris, error)


__all__ = [
    "AFTER_NAME",
    "ATIF_NAME",
    "FULL_AFTER_NAME",
    "TRAJECTORY_NAME",
    "WRITE_EVERY_S",
    "TrialProgress",
    "evidence_in_folder",
    "in_flight",
]
