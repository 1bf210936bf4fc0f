"""One trial inside its own pod (``atoll trial run``): the other half of the Kubernetes executor.

The executor writes a :class:`PodTrialInput` to the attempt's artifact folder
(``<artifacts>/<experiment>/<task>/<agent>/run-<n>/attempt-<k>/input.json``, see
``orchestrator.artifacts``) and starts a Job whose pod holds an environment container and this command, which
share localhost. The command downloads the seed snapshot, populates the environment at
``--environment-url`` (upload, so the environment needs no network), checks freshness, runs
the agent in this process over MCP, takes the final snapshot, grades (grading service, or in
process), stores the artifacts and writes ``outcome.json`` beside the input:
``{"result": TrialResult | null, "infra_error": str | null}`` (with an infra_error, the result is
the failed attempt's evidence: orchestrator.executors.evidence). The executor reads it back.

With an S3 store the pod holds no store credentials: ``--input`` is a presigned GET of the
input, and the input carries :class:`PresignedAccess` — a presigned GET of the seed and one
presigned PUT per file the pod writes (:data:`POD_WRITES`), all of the attempt's own folder,
expiring with the Job's deadline. Any other store (``file://`` for local and kind use) is
reached through fsspec as before (:mod:`orchestrator.executors.kubernetes_folders`).

From a populated world to the result the pod runs the local executor's code
(:mod:`orchestrator.executors.trial_phases`): checkpoints, resume, grading and the result.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from atoll import telemetry
from atoll.benchmark import Task
from atoll.errors import AtollError, ErrorCode
from atoll.experiment import Checkpoints
from atoll.jsonio import model_json
from atoll.judge import CHECKS_ONLY
from atoll.llm.admission import judge_from_request
from atoll.trial import TrialResult, TrialSpec
from atoll.world_deltas import read_manifest
from atoll.world_manifest import WorldManifest
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors import agent_runs, steps
from orchestrator.executors.base import InfraError
from orchestrator.executors.evidence import TrialProgress
from orchestrator.executors.kubernetes_folders import (
    INPUT_NAME,
    OUTCOME_NAME,
    POD_WRITES,
    PRESIGN_MARGIN_S,
    AttemptFolder,
    PresignedAccess,
    PresignedFolder,
    StoreFolder,
    is_http,
    presign_attempt,
    refusal,
    without_query,
)
from orchestrator.executors.trial_phases import TrialSeed, finish_trial, grade_world, run_agent_phase


class PodTrialInput(BaseModel):
    """Everything a trial pod needs; secrets never enter it (they come from the pod's env)."""

    spec: TrialSpec
    attempt: int = Field(ge=1)
    task: Task
    world_options: dict[str, Any] = Field(default_factory=dict)
    servers: list[str] = Field(default_factory=list, description="MCP servers to configure (empty: the nine)")
    seed_key: str = Field(description="artifact key of the seed's full archive (what the pod populates from)")
    seed_manifest_key: str = Field(
        description="artifact key of the seed's manifest: the trial's initial state, which its final delta builds on"
    )
    seed_digest: str = Field(description="the seed manifest's digest, which the populated world must have")
    artifacts: str = Field(description="artifact store root URL")
    grade_incomplete: bool = False
    judge: dict[str, Any] = Field(
        default_factory=lambda: dict(CHECKS_ONLY),
        description="the judge's wire form (atoll.judge; {'model': null} = checks only)",
    )
    presigned: PresignedAccess | None = Field(
        None, description="S3 stores: the only way the pod reaches the store (no credentials)"
    )
    checkpoint: Checkpoints | None = Field(
        None,
        description="when the trial takes checkpoints and resumes from its latest "
        "(orchestrator.executors.checkpoints; through presigned URLs with an S3 store); null: none",
    )


class PodTrialOutcome(BaseModel):
    result: TrialResult | None = None
    infra_error: str | None = None


def input_key(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str:
    """Where the executor writes the attempt's input (claiming its artifact folder)."""
    return f"{claim_trial_folder(artifacts, spec, attempt)}/{INPUT_NAME}"


def outcome_key(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str:
    """Where the pod writes the attempt's outcome: beside its input."""
    return f"{claim_trial_folder(artifacts, spec, attempt)}/{OUTCOME_NAME}"


def outcome_uri(input_uri: str) -> str:
    """Where the outcome of the attempt whose input is at ``input_uri`` goes: beside it. The
    executor claimed that folder when it wrote the input; the pod never claims one again
    (a second claim could, on a passing read error, land elsewhere)."""
    return f"{input_uri.rsplit('/', 1)[0]}/{OUTCOME_NAME}"


def load_input(uri: str) -> tuple[PodTrialInput, ArtifactStore]:
    """Read the trial input at ``uri`` (an fsspec URL, or a presigned http(s) URL);
    AtollError(bad_trial_input) when absent or invalid."""
    import fsspec

    try:
        if is_http(uri):
            response = httpx.get(uri, timeout=httpx.Timeout(60.0, connect=10.0))
            if response.status_code != 200:
                raise AtollError(
                    ErrorCode.bad_trial_input, refusal(f"trial input {without_query(uri)}", response)
                )
            trial_input = PodTrialInput.model_validate_json(response.content)
        else:
            with fsspec.open(uri, "rb") as handle:
                trial_input = PodTrialInput.model_validate_json(handle.read())
    except (OSError, ValueError, httpx.HTTPError) as exc:
        where = without_query(uri)
        raise AtollError(
            ErrorCode.bad_trial_input, f"trial input {where}: {str(exc).splitlines()[0]}"
        ) from None
    return trial_input, ArtifactStore(trial_input.artifacts)


def _folder_of(artifacts: ArtifactStore, input_uri: str, spec: TrialSpec, attempt: int) -> str:
    key = artifacts.key_of(input_uri)
    if key and key.endswith(f"/{INPUT_NAME}"):
        return key[: -len(INPUT_NAME) - 1]
    return claim_trial_folder(artifacts, spec, attempt)  # an input outside the store's folders


async def run_pod_trial(
    input_uri: str,
    *,
    environment_url: str,
    grader_url: str | None = None,
    env_token: str | None = None,
    mcp_token: str | None = None,
    health_timeout_s: float = 180.0,
    grader_token: str | None = None,
) -> PodTrialOutcome:
    """Run the trial described at ``input_uri`` and write its outcome beside it.

    Infrastructure failures are recorded as ``infra_error`` in the outcome (and returned);
    a bad input raises AtollError (nothing can be recorded then)."""
    trial_input, artifacts = load_input(input_uri)
    seed = {"seed_key": trial_input.seed_key, "seed_manifest_key": trial_input.seed_manifest_key}
    folder: AttemptFolder
    if trial_input.presigned is not None:
        folder = PresignedFolder(trial_input.presigned, artifacts, **seed)
    else:
        prefix = _folder_of(artifacts, input_uri, trial_input.spec, trial_input.attempt)
        folder = StoreFolder(artifacts, prefix, **seed)
    # The trajectory so far goes to the folder as it grows; a failure keeps its evidence there.
    progress = TrialProgress(trial_input.spec, trial_input.task, trial_input.attempt)
    progress.attach(folder.put)
    # The seed and the final delta live here until the failed attempt's evidence is kept.
    scratch = Path(tempfile.mkdtemp(prefix="atoll-trial-"))
    try:
        result = await _run(
            trial_input,
            folder,
            environment_url,
            grader_url,
            env_token,
            mcp_token,
            health_timeout_s,
            grader_token,
            progress,
            scratch,
        )
        outcome = PodTrialOutcome(result=result)
    except InfraError as exc:
        await progress.stop()
        evidence = await asyncio.to_thread(progress.keep_evidence, str(exc))
        outcome = PodTrialOutcome(infra_error=str(exc), result=evidence)
    finally:
        await progress.close()
        shutil.rmtree(scratch, ignore_errors=True)
    folder.put_outcome(model_json(outcome, indent=2).encode())
    return outcome


async def _run(
    trial_input: PodTrialInput,
    folder: AttemptFolder,
    environment_url: str,
    grader_url: str | None,
    env_token: str | None,
    mcp_token: str | None,
    health_timeout_s: float,
    grader_token: str | None,
    progress: TrialProgress,
    scratch: Path,
) -> TrialResult:
    spec, task = trial_input.spec, trial_input.task
    environment = steps.EnvironmentEndpoint(environment_url, env_token, mcp_token)
    before = scratch / "before.tar.gz"
    await asyncio.to_thread(folder.get_seed, before)
    read_seed = steps.archive_reader(before)
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(600.0, connect=10.0), event_hooks=telemetry.httpx_hooks()
    ) as http:
        # The environment container starts beside this one; wait for it.
        await steps.wait_until_healthy(http, environment_url, timeout_s=health_timeout_s)
        prepare = functools.partial(
            steps.prepare_world,
            http,
            environment,
            world_id=spec.world_id,
            world_options=trial_input.world_options,
            servers=tuple(trial_input.servers) or None,
        )

        async def seed_manifest() -> WorldManifest:
            try:
                data = await asyncio.to_thread(folder.get_seed_manifest)
                return read_manifest(data, trial_input.seed_manifest_key)
            except AtollError as exc:  # InfraError is raised as it is
                if isinstance(exc, InfraError):
                    raise
                raise InfraError(f"seed manifest {trial_input.seed_manifest_key}: {exc.message}") from exc

        seed = TrialSeed(
            digest=trial_input.seed_digest,
            manifest_key=trial_input.seed_manifest_key,
            read=read_seed,
            manifest=seed_manifest,
            populate=functools.partial(prepare, seed_digest=trial_input.seed_digest, seed_archive=before),
        )
        progress.before_uri = folder.seed_uri

        def run_agent(**checkpoints: Any):
            return agent_runs.run_agent_in_process(
                environment, task, spec, on_change=progress.observe, **checkpoints
            )

        # Checkpoints go to the store, or through its presigned URLs (None: the input has none).
        checkpoint_store = folder.checkpoint_store(spec) if trial_input.checkpoint is not None else None
        phase = await run_agent_phase(
            http,
            environment,
            spec,
            attempt=trial_input.attempt,
            seed=seed,
            prepare=prepare,
            checkpoints=checkpoint_store,
            policy=trial_input.checkpoint,
            run_agent=run_agent,
            progress=progress,
            scratch=scratch,
            final_base=folder.delta_base(),
        )
    judge = judge_from_request(trial_input.judge)
    return await finish_trial(
        spec,
        task,
        phase,
        progress,
        attempt=trial_input.attempt,
        grade_incomplete=trial_input.grade_incomplete,
        read_populated=read_seed,
        grade=lambda snapshots, trajectory: grade_world(
            task,
            spec,
            trajectory,
            snapshots,
            scratch,
            judge=judge,
            judge_request=trial_input.judge,
            grader_url=grader_url,
            grader_token=grader_token,
            in_process_hint="or give the pod ATOLL_GRADER_URL to grade through the grading service",
        ),
        store=folder.store,
    )


__all__ = [
    "POD_WRITES",
    "PRESIGN_MARGIN_S",
    "PodTrialInput",
    "PresignedAccess",
    "PodTrialOutcome",
    "input_key",
    "load_input",
    "outcome_key",
    "outcome_uri",
    "presign_attempt",
    "run_pod_trial",
]
