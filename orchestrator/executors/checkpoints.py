"""A trial's checkpoints: written while it runs, read back when a new attempt takes it over.

A checkpoint is the world as a delta on the seed (``world.delta.tar.gz``, from
``POST /data/snapshot/delta``) and the agent's state (``agent.json``, an
:class:`~atoll.agent_checkpoint.AgentCheckpoint`), taken together at a step boundary while
the agent waits (so no tool call changes the world in between). They live in the run's folder
of the artifact store, one folder per trial::

    <experiment>/<task>/<agent>/run-<n>/checkpoints-<first 16 of the trial id>/
        slot-a/{world.delta.tar.gz, agent.json}
        slot-b/{world.delta.tar.gz, agent.json}
        latest.json        # {slot, step, attempt, taken_at, world_digest, ...}: written last

Two slots alternate: a checkpoint is written into the slot ``latest.json`` does not name, and
``latest.json`` is replaced (atomically: the store writes ``.partial`` then moves it) only once
both files are stored, so it never names a half-written slot and the two latest checkpoints are
all a trial keeps. The delta is taken while the agent waits; the files are stored in the
background, and the next checkpoint waits for the previous one to be stored before it starts.

The local executor and the Kubernetes trial pod share this module, through
:func:`orchestrator.executors.trial_phases.run_agent_phase`: :class:`CheckpointWriter` is the
agent's ``on_checkpoint`` callback (in process, or fed by the agents runner service),
:func:`read_latest` finds what a new attempt resumes from (or why it cannot),
:func:`rebuild_world` makes the full archive it is populated from.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import posixpath
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from atoll.agent_checkpoint import AgentCheckpoint, check_resumable, load_agent_checkpoint
from atoll.errors import AtollError, describe_validation
from atoll.world_deltas import Delta
from atoll.world_manifest import WorldManifest
from orchestrator.artifacts import trial_prefix

if TYPE_CHECKING:
    from atoll.trial import TrialSpec
    from orchestrator.artifacts import ArtifactStore

logger = logging.getLogger("atoll.checkpoints")

SLOTS = ("slot-a", "slot-b")
WORLD_NAME = "world.delta.tar.gz"
AGENT_NAME = "agent.json"
LATEST_NAME = "latest.json"

Slot = Literal["slot-a", "slot-b"]


class CheckpointStore(Protocol):
    """What reaches a trial's checkpoint folder: the artifact store, or a trial pod's presigned
    URLs of it (:class:`~orchestrator.executors.presigned_checkpoints.PresignedCheckpointStore`).
    Every failure is an OSError."""

    def uri(self, key: str, /) -> str: ...

    def exists(self, key: str, /) -> bool: ...

    def get_bytes(self, key_or_uri: str, /) -> bytes: ...

    def get_file(self, uri: str, local_path: str | Path, /) -> Path: ...

    def put_bytes(self, key: str, data: bytes, /) -> str: ...

    def put_file(self, key: str, local_path: str | Path, /) -> str: ...


class LatestCheckpoint(BaseModel):
    """``latest.json``: which slot holds the trial's latest complete checkpoint, and what it is."""

    model_config = ConfigDict(extra="forbid")

    slot: Slot
    step: int = Field(ge=0, description="steps completed at the checkpoint")
    attempt: int = Field(ge=1, description="the attempt that took it")
    taken_at: datetime
    trial_id: str
    agent: str
    model: str
    seed_digest: str = Field(description="the seed the world delta builds on")
    world_digest: str = Field(description="the digest of the checkpoint's world (its manifest's)")
    world_sha256: str = Field(description="sha256 of the slot's world.delta.tar.gz")
    agent_sha256: str = Field(description="sha256 of the slot's agent.json")


def checkpoint_folder(spec: TrialSpec) -> str:
    """The trial's checkpoint folder: in its run's folder (deleting the run removes it), named
    by the trial id (a run folder can be shared with an archived configuration's trial)."""
    run_folder = posixpath.dirname(trial_prefix(spec, 1))
    return f"{run_folder}/checkpoints-{spec.trial_id[:16]}"


@dataclass
class ResumePoint:
    """A checkpoint a new attempt can resume from: the agent's state, and the world's delta
    (downloaded to ``delta_path``, its manifest checked against ``latest``)."""

    latest: LatestCheckpoint
    agent: AgentCheckpoint
    delta_path: Path


def discard_checkpoints(artifacts: ArtifactStore, spec: TrialSpec) -> None:
    """Remove the trial's checkpoint folder once its result is recorded for good (its two
    slots hold the agent's whole context: at the paper's scale, kept, they would cost more than
    every trial's world). Best effort: a store that fails here only keeps them (logged)."""
    folder = artifacts.full_path(checkpoint_folder(spec))
    try:
        if artifacts.fs.exists(folder):
            artifacts.fs.rm(folder, recursive=True)
    except OSError as exc:
        logger.warning("trial %s: its checkpoints were not removed: %s", spec.trial_id[:12], exc)


def read_latest(
    artifacts: CheckpointStore, spec: TrialSpec, seed_digest: str, scratch: Path
) -> tuple[ResumePoint | None, str | None]:
    """The trial's latest checkpoint, read and checked: (the point to resume from, None), or
    (None, why it cannot be resumed) for one that is unreadable, of another trial, agent, model
    or seed, or whose files do not match ``latest.json``; (None, None) when it has none. Never
    raises for the checkpoint's content (blocking: call it in a thread)."""
    folder = checkpoint_folder(spec)
    key = f"{folder}/{LATEST_NAME}"
    try:
        if not artifacts.exists(key):
            return None, None
        raw = artifacts.get_bytes(key)
    except OSError as exc:
        return None, f"{artifacts.uri(key)} cannot be read: {exc}"
    try:
        latest = LatestCheckpoint.model_validate_json(raw)
    except ValidationError as exc:
        return None, f"{artifacts.uri(key)} is not a checkpoint pointer: {describe_validation(exc)}"
    expected = {
        "trial_id": spec.trial_id,
        "agent": spec.agent,
        "model": spec.model,
        "seed_digest": seed_digest,
    }
    for name, value in expected.items():
        if getattr(latest, name) != value:
            return (
                None,
                f"{artifacts.uri(key)} is of {name} {getattr(latest, name)!r}, this trial's is {value!r}",
            )
    slot = f"{folder}/{latest.slot}"
    try:
        agent_bytes = artifacts.get_bytes(f"{slot}/{AGENT_NAME}")
        if hashlib.sha256(agent_bytes).hexdigest() != latest.agent_sha256:
            return (
                None,
                f"{artifacts.uri(slot)}/{AGENT_NAME} is not the one {LATEST_NAME} names (sha256 differs)",
            )
        agent = load_agent_checkpoint(agent_bytes)
        check_resumable(
            agent, agent=spec.agent, model=spec.model, task_id=spec.task_id, trial_id=spec.trial_id
        )
        if agent.step != latest.step:
            return (
                None,
                f"{artifacts.uri(slot)}/{AGENT_NAME} is of step {agent.step}, {LATEST_NAME} says {latest.step}",
            )
        delta_path = artifacts.get_file(
            artifacts.uri(f"{slot}/{WORLD_NAME}"), scratch / "checkpoint.delta.tar.gz"
        )
        if _file_sha256(delta_path) != latest.world_sha256:
            return (
                None,
                f"{artifacts.uri(slot)}/{WORLD_NAME} is not the one {LATEST_NAME} names (sha256 differs)",
            )
        delta = Delta(delta_path)
    except AtollError as exc:
        return None, f"{artifacts.uri(slot)}: {exc.message}"
    except OSError as exc:
        return None, f"{artifacts.uri(slot)} cannot be read: {exc}"
    if delta.manifest.base_digest != seed_digest or delta.manifest.digest() != latest.world_digest:
        return (
            None,
            f"{artifacts.uri(slot)}/{WORLD_NAME} is not a delta of {LATEST_NAME}'s world on this seed",
        )
    return ResumePoint(latest, agent, delta_path), None


def rebuild_world(
    seed_manifest: WorldManifest,
    read_seed: Callable[[set[str]], dict[str, bytes]],
    delta_path: Path,
    target: Path,
) -> Path:
    """The full archive of the checkpoint's world (the bytes ``/data/snapshot`` gave for it),
    from the seed (its manifest, and ``read_seed`` reading its members by path: a folder or an
    archive, :mod:`orchestrator.executors.steps`) and the delta, at ``target``. Raises
    ManifestError for a delta whose contents are missing or do not hash to their names."""
    from orchestrator.executors import steps

    _before, world = steps.trial_snapshots(seed_manifest, read_seed, delta_path)
    return steps.write_full_archive(world, target)


async def populate_checkpoint(
    resume: ResumePoint,
    seed_manifest: WorldManifest,
    read_seed: Callable[[set[str]], dict[str, bytes]],
    scratch: Path,
    prepare: Callable[..., Awaitable[WorldManifest]],
) -> str | None:
    """Populate the environment with the checkpoint's world and check it is fresh (``prepare``:
    :func:`~orchestrator.executors.steps.prepare_world` with all but the seed given); None when
    done, else why not (the caller then starts over from the seed)."""
    try:
        archive = await asyncio.to_thread(
            rebuild_world, seed_manifest, read_seed, resume.delta_path, scratch / "checkpoint-world.tar.gz"
        )
        await prepare(seed_digest=resume.latest.world_digest, seed_archive=archive)
    except (AtollError, OSError) as exc:  # InfraError included
        why = exc.message if isinstance(exc, AtollError) else f"{type(exc).__name__}: {exc}"
        return f"the world of the checkpoint of step {resume.latest.step}: {why}"
    return None


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


TakeDelta = Callable[[Path, str], Awaitable[Path]]
"""Takes the world's delta on the seed into a file: ``(path, base) -> path``."""


class CheckpointWriter:
    """The agent's ``on_checkpoint``: takes the world's delta while the agent waits, stores it
    and the agent's state into the free slot in the background, then ``latest.json``.

    A checkpoint that cannot be taken or stored is logged and skipped (the trial goes on; the
    previous one stays the latest): checkpoints are insurance, not part of what is measured."""

    def __init__(
        self,
        artifacts: CheckpointStore,
        spec: TrialSpec,
        *,
        attempt: int,
        seed_digest: str,
        seed_manifest_key: str,
        take_delta: TakeDelta,
        scratch: Path,
        latest: LatestCheckpoint | None = None,
    ) -> None:
        self.artifacts = artifacts
        self.spec = spec
        self.attempt = attempt
        self.seed_digest = seed_digest
        self.seed_manifest_key = seed_manifest_key
        self.take_delta = take_delta
        self.scratch = scratch
        self.folder = checkpoint_folder(spec)
        self.latest = latest  # what latest.json names now (never written over)
        self.stored = 0
        self.failures: list[str] = []
        self.pause_s: list[float] = []  # the agent's wait per checkpoint
        self._storing: asyncio.Task[None] | None = None

    def _free_slot(self) -> Slot:
        if self.latest is None or self.latest.slot == "slot-b":
            return "slot-a"
        return "slot-b"

    async def __call__(self, checkpoint: AgentCheckpoint) -> None:
        started = asyncio.get_running_loop().time()
        try:
            await self.drain()  # the previous one stored (or given up) before this one starts
            slot = self._free_slot()
            from atoll.world_store import relative_reference

            base = relative_reference(f"{self.folder}/{slot}/{WORLD_NAME}", self.seed_manifest_key)
            delta_path = self.scratch / f"checkpoint-{checkpoint.step}.delta.tar.gz"
            try:
                await self.take_delta(delta_path, base)
            except AtollError as exc:  # InfraError included
                self._failed(checkpoint.step, f"world delta: {exc.message}")
                delta_path.unlink(missing_ok=True)
                return
            self._storing = asyncio.create_task(self._store(checkpoint, slot, delta_path))
        finally:
            self.pause_s.append(asyncio.get_running_loop().time() - started)

    async def drain(self) -> None:
        """Wait until the checkpoint being stored is stored (or failed)."""
        if self._storing is not None:
            storing, self._storing = self._storing, None
            await storing

    async def _store(self, checkpoint: AgentCheckpoint, slot: Slot, delta_path: Path) -> None:
        try:
            latest = await asyncio.to_thread(self._store_files, checkpoint, slot, delta_path)
        except (OSError, AtollError, ValueError) as exc:
            self._failed(checkpoint.step, f"storing into {slot}: {type(exc).__name__}: {exc}")
            return
        finally:
            delta_path.unlink(missing_ok=True)
        self.latest = latest
        self.stored += 1
        logger.info(
            "checkpoint stored",
            extra={"trial_id": self.spec.trial_id, "step": checkpoint.step, "slot": slot},
        )

    def _store_files(self, checkpoint: AgentCheckpoint, slot: Slot, delta_path: Path) -> LatestCheckpoint:
        agent_bytes = checkpoint.model_dump_json().encode()
        delta = Delta(delta_path)  # its manifest: the world's digest, for the freshness check on resume
        latest = LatestCheckpoint(
            slot=slot,
            step=checkpoint.step,
            attempt=self.attempt,
            taken_at=datetime.now(UTC),
            trial_id=self.spec.trial_id,
            agent=self.spec.agent,
            model=self.spec.model,
            seed_digest=self.seed_digest,
            world_digest=delta.manifest.digest(),
            world_sha256=_file_sha256(delta_path),
            agent_sha256=hashlib.sha256(agent_bytes).hexdigest(),
        )
        self.artifacts.put_file(f"{self.folder}/{slot}/{WORLD_NAME}", delta_path)
        self.artifacts.put_bytes(f"{self.folder}/{slot}/{AGENT_NAME}", agent_bytes)
        # Last, and atomically (put_bytes writes .partial then moves it): the slot is complete.
        self.artifacts.put_bytes(f"{self.folder}/{LATEST_NAME}", latest.model_dump_json(indent=2).encode())
        return latest

    def _failed(self, step: int, why: str) -> None:
        self.failures.append(f"step {step}: {why}")
        logger.warning(
            "checkpoint skipped", extra={"trial_id": self.spec.trial_id, "step": step, "error": why}
        )


__all__ = [
    "AGENT_NAME",
    "LATEST_NAME",
    "SLOTS",
    "WORLD_NAME",
    "CheckpointStore",
    "CheckpointWriter",
    "LatestCheckpoint",
    "ResumePoint",
    "checkpoint_folder",
    "populate_checkpoint",
    "read_latest",
    "rebuild_world",
]
