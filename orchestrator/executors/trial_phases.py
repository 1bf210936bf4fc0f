"""The phases of a trial that the local executor and the Kubernetes trial pod share.

Each executor gets its environment ready and knows where its seed is (:class:`TrialSeed`: a
local seed folder, or the seed archive a pod downloaded); from there both run the same code:

- :func:`run_agent_phase`, from a ready environment to the world's final state:

  1. the trial's latest checkpoint, when it takes checkpoints (:func:`checkpoints.read_latest`):
     its world (the seed plus the checkpoint's delta) populated and checked fresh; one that is
     unreadable, of another trial, agent, model or seed, or whose world cannot be rebuilt is
     refused, saying why, and the world is populated from the seed instead;
  2. the agent (``run_agent``: in this process, or in the agents runner service) resumed from
     the checkpoint's agent state, taking checkpoints through a :class:`CheckpointWriter`;
  3. an agent that refuses the checkpoint once it has started (``bad_checkpoint``: a toolbelt
     tool the world does not serve, a reference step past the solution, a runner that cannot
     take the resume) starts over from the seed, once, in the same attempt, the reason kept in
     the trajectory's ``resume_refused``: failing the attempt would only meet the same
     checkpoint again at every retry until the retries ran out;
  4. the world's final state as a delta on the seed (a resumed world included).

- :func:`finish_trial`: an infrastructure failure raised, the grading (:func:`grade_world`:
  the grading service, sent full archives, or the grader in this process), the artifacts stored
  and the :class:`TrialResult` built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from atoll.errors import AtollError
from atoll.extras import require_extra
from atoll.trajectory import RunStatus, Trajectory
from atoll.world_manifest import WorldManifest
from orchestrator.executors import steps
from orchestrator.executors.checkpoints import (
    CheckpointStore,
    CheckpointWriter,
    LatestCheckpoint,
    ResumePoint,
    populate_checkpoint,
    read_latest,
)
from orchestrator.executors.steps import EnvironmentEndpoint

if TYPE_CHECKING:
    from atoll.agent_checkpoint import AgentCheckpoint
    from atoll.benchmark import Task
    from atoll.experiment import Checkpoints
    from atoll.grade import Grade
    from atoll.judge import JudgeConfig
    from atoll.trial import TrialResult, TrialSpec
    from grader import VerdictCache
    from grader.snapshot import ManifestSnapshot, Snapshot
    from orchestrator.executors.evidence import TrialProgress

logger = logging.getLogger("atoll.executor")

REFUSED = "bad_checkpoint"  # the code of an agent's (or runner's) refusal of its checkpoint

ReadMembers = Callable[[set[str]], dict[str, bytes]]
Snapshots = tuple["ManifestSnapshot", "ManifestSnapshot | Snapshot"]


@dataclass(frozen=True)
class TrialSeed:
    """The world a trial starts from, as its executor has it."""

    digest: str  # the seed manifest's digest: what a freshly populated world must have
    manifest_key: str  # the seed's stored manifest (seeds/<key>.manifest.json): deltas build on it
    read: ReadMembers  # its members by path (an extracted folder, or its archive)
    manifest: Callable[[], Awaitable[WorldManifest]]  # its manifest (a resume rebuilds on it)
    populate: Callable[[], Awaitable[WorldManifest]]  # populate the environment from it, checked fresh


class RunAgent(Protocol):
    """Runs the trial's agent (in this process, or in the agents runner service)."""

    def __call__(
        self,
        *,
        checkpoint: Checkpoints | None,
        on_checkpoint: CheckpointWriter | None,
        resume: AgentCheckpoint | None,
        attempt: int,
    ) -> Awaitable[Trajectory]: ...


@dataclass(frozen=True)
class AgentPhase:
    """What the agent phase leaves: the agent's trajectory, the trial's initial state (the seed's
    manifest, also for a resumed trial) and its final state (a delta on the seed, or the full
    archive that stands for it)."""

    trajectory: Trajectory
    populated: WorldManifest
    after: Path


async def run_agent_phase(
    http: httpx.AsyncClient,
    environment: EnvironmentEndpoint,
    spec: TrialSpec,
    *,
    attempt: int,
    seed: TrialSeed,
    prepare: Callable[..., Awaitable[WorldManifest]],
    checkpoints: CheckpointStore | None,
    policy: Checkpoints | None,
    run_agent: RunAgent,
    progress: TrialProgress,
    scratch: Path,
    final_base: str,
) -> AgentPhase:
    """Resume (or populate), run the agent taking checkpoints, take the final state (module
    docstring). ``prepare``: :func:`steps.prepare_world` with all but the seed given;
    ``checkpoints``: where the trial's checkpoints are (None, or no ``policy``: it takes none);
    ``final_base``: the seed's manifest as the attempt's folder names it. Raises InfraError for
    a failure of the machinery."""
    if checkpoints is None:
        policy = None
    resume, refused = None, None
    if policy is not None and checkpoints is not None:
        resume, refused = await asyncio.to_thread(read_latest, checkpoints, spec, seed.digest, scratch)
    if resume is not None:  # the checkpoint's world: the seed and the checkpoint's delta
        seed_manifest = await seed.manifest()  # the trial's initial state stays the seed
        refused = await populate_checkpoint(resume, seed_manifest, seed.read, scratch, prepare)
        resume = None if refused else resume
    populated = seed_manifest if resume is not None else await seed.populate()
    if refused:
        _log_refusal(spec, attempt, refused)

    async def run(
        resume: ResumePoint | None, latest: LatestCheckpoint | None
    ) -> tuple[Trajectory | None, str | None, LatestCheckpoint | None]:
        """The agent's trajectory, or (None, why) when it refused ``resume``; and what
        ``latest.json`` names after it."""
        # A world populated from a checkpoint still takes its deltas on the seed.
        base_manifest = _manifest_json(populated) if resume is not None else None
        writer = None
        if policy is not None and checkpoints is not None:

            async def take_delta(path: Path, base: str) -> Path:
                body = steps.delta_request(base, seed.digest, base_manifest)
                return await steps.take_world_delta(http, environment, path, body)

            writer = CheckpointWriter(
                checkpoints,
                spec,
                attempt=attempt,
                seed_digest=seed.digest,
                seed_manifest_key=seed.manifest_key,
                take_delta=take_delta,
                scratch=scratch,
                latest=latest,
            )
        try:
            trajectory = await run_agent(
                checkpoint=policy,
                on_checkpoint=writer,
                resume=resume.agent if resume is not None else None,
                attempt=attempt,
            )
        except AtollError as exc:
            if resume is None or exc.code != REFUSED:
                raise
            return None, exc.message, writer.latest if writer else latest
        finally:
            if writer is not None:
                await writer.drain()  # never leave a checkpoint half stored behind the trial
        latest = writer.latest if writer else latest
        error = trajectory.error
        if resume is not None and trajectory.status is RunStatus.error and error and error.code == REFUSED:
            return None, error.message.removeprefix(f"{REFUSED}: "), latest
        return trajectory, None, latest

    trajectory, refused_by_agent, latest = await run(resume, resume.latest if resume is not None else None)
    if trajectory is None:
        assert resume is not None and refused_by_agent is not None
        refused = f"the agent refused the checkpoint of step {resume.latest.step}: {refused_by_agent}"
        _log_refusal(spec, attempt, refused)
        progress.restart()
        populated = await seed.populate()
        resume = None
        # Into the slot latest.json does not name: the refused checkpoint stays until replaced.
        trajectory, _, _ = await run(None, latest)
        assert trajectory is not None
    if refused:
        trajectory = trajectory.model_copy(update={"resume_refused": refused})
    progress.trajectory = trajectory
    after = progress.after = await steps.take_final_state(
        http,
        environment,
        scratch,
        base=final_base,
        base_digest=seed.digest,
        base_manifest=_manifest_json(populated) if resume is not None else None,
    )
    return AgentPhase(trajectory, populated, after)


def _manifest_json(manifest: WorldManifest) -> dict[str, Any]:
    return manifest.model_dump(mode="json", exclude_none=True)


def _log_refusal(spec: TrialSpec, attempt: int, why: str) -> None:
    logger.warning(
        "checkpoint not resumed; the trial starts over from the seed",
        extra={"trial_id": spec.trial_id, "attempt": attempt, "error": why},
    )


async def grade_world(
    task: Task,
    spec: TrialSpec,
    trajectory: Trajectory,
    snapshots: Snapshots,
    scratch: Path,
    *,
    judge: JudgeConfig | None,
    judge_request: dict[str, Any],
    grader_url: str | None = None,
    grader_token: str | None = None,
    cache: VerdictCache | None = None,
    in_process_hint: str = "or set ATOLL_GRADER_URL to grade through the grading service",
) -> Grade:
    """Grade the trial's before and after snapshots: through the grading service at
    ``grader_url`` (sent full archives, written into ``scratch``, and ``judge_request``, the
    judge's wire form) or with the grader in this process (``judge``, ``cache``; without the
    ``formats`` extra installed that is refused, naming it and ``in_process_hint``). A grading
    that fails is an InfraError (:func:`steps.grader_failure`)."""
    before, after = snapshots
    if grader_url:  # the grading service takes full archives
        before_path = await asyncio.to_thread(
            steps.write_full_archive, before, scratch / "graded-before.tar.gz"
        )
        after_path = await asyncio.to_thread(steps.write_full_archive, after, scratch / "graded-after.tar.gz")
        return await steps.grade_with_service(
            grader_url, task, before_path, after_path, trajectory, judge_request, token=grader_token
        )
    require_extra("formats", "grading in-process", in_process_hint)
    from grader import grade_trial

    try:
        return await grade_trial(task, before, after, trajectory, judge, cache, trial_id=spec.trial_id)
    except AtollError as exc:
        raise steps.grader_failure(exc) from exc


async def finish_trial(
    spec: TrialSpec,
    task: Task,
    phase: AgentPhase,
    progress: TrialProgress,
    *,
    attempt: int,
    grade_incomplete: bool,
    read_populated: ReadMembers,
    grade: Callable[[Snapshots, Trajectory], Awaitable[Grade]],
    store: Callable[[Trajectory, Grade | None, Path], dict[str, str | None]],
) -> TrialResult:
    """The trial's result: an infrastructure or provider failure of the agent raised
    (:func:`steps.raise_for_infrastructure`), the trajectory given the exchanges with the world's
    personas (:func:`steps.with_coworker_turns`), the final state graded when the run ended in a
    gradeable state (``grade``, given the snapshots and that trajectory; ``read_populated`` reads
    the initial world's members), the artifacts stored (``store``, blocking: run in a thread)."""
    steps.raise_for_infrastructure(phase.trajectory)
    await progress.stop()
    snapshots = await asyncio.to_thread(steps.trial_snapshots, phase.populated, read_populated, phase.after)
    # The agent's exchanges with the world's personas, which the final world records.
    trajectory = await asyncio.to_thread(steps.with_coworker_turns, phase.trajectory, *snapshots)
    graded = None
    if steps.should_grade(trajectory, grade_incomplete):
        graded = await grade(snapshots, trajectory)
    uris = await asyncio.to_thread(store, trajectory, graded, phase.after)
    return steps.build_result(
        spec, task, trajectory, graded, attempt=attempt, duration_s=progress.elapsed_s, uris=uris
    )


__all__ = ["AgentPhase", "RunAgent", "TrialSeed", "finish_trial", "grade_world", "run_agent_phase"]
