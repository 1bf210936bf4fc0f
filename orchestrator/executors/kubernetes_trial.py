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
reached through fsspec as before.
"""

from __future__ import annotations

import asyncio
import functools
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from pydantic import BaseModel, Field

from atoll.benchmark import Task
from atoll.errors import AtollError
from atoll.experiment import Checkpoints
from atoll.grade import Grade
from atoll.jsonio import model_json
from atoll.judge import CHECKS_ONLY, judge_from_request
from atoll.trajectory import Trajectory
from atoll.trial import TrialResult, TrialSpec
from atoll.world_manifest import WorldManifest
from atoll.world_store import relative_reference
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors import steps
from orchestrator.executors.base import InfraError
from orchestrator.executors.checkpoints import (
    CheckpointWriter,
    checkpoint_folder,
    populate_checkpoint,
    read_latest,
)
from orchestrator.executors.evidence import AFTER_NAME, FULL_AFTER_NAME, TrialProgress
from orchestrator.executors.presigned_checkpoints import CHECKPOINT_FILES, PresignedCheckpointStore

if TYPE_CHECKING:
    from grader.snapshot import ManifestSnapshot

INPUT_NAME = "input.json"
OUTCOME_NAME = "outcome.json"
TRAJECTORY_NAME = "trajectory.json"
GRADE_NAME = "grade.json"
POD_WRITES = (
    OUTCOME_NAME,
    TRAJECTORY_NAME,
    GRADE_NAME,
    AFTER_NAME,
    FULL_AFTER_NAME,
)  # all a trial pod writes
PRESIGN_MARGIN_S = 300  # presigned URLs outlive the Job's deadline by this much


class PresignedAccess(BaseModel):
    """A trial pod's whole access to an S3 artifact store: presigned URLs of its attempt's own
    folder (and the seed it starts from), made by the worker, which holds the credentials."""

    folder_uri: str = Field(description="the attempt's folder (s3://…): where the results are recorded")
    seed_url: str = Field(description="presigned GET of the seed snapshot")
    put_urls: dict[str, str] = Field(description="file name -> presigned PUT of <folder>/<name>")
    seed_manifest_url: str | None = Field(None, description="presigned GET of the seed's manifest")
    checkpoint_urls: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="the trial's checkpoint files (latest.json, slot-a/agent.json, …) -> "
        "{GET, PUT}: presigned URLs in its checkpoint folder",
    )
    expires_at: float = Field(description="when the URLs stop working (epoch seconds)")


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
        "(orchestrator.executors.checkpoints); null: none. Not with presigned access yet",
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


def presign_attempt(
    artifacts: ArtifactStore,
    folder: str,
    seed_key: str,
    expires_s: float,
    *,
    seed_manifest_key: str | None = None,
    checkpoints: str | None = None,
) -> tuple[str, PresignedAccess]:
    """The presigned GET of the attempt's input (what the pod is given) and the access the
    input carries, all valid for ``expires_s`` seconds (the Job's deadlines plus a margin):
    with ``checkpoints`` (the trial's checkpoint folder) a GET and a PUT of each of its fixed
    files, and with ``seed_manifest_key`` a GET of the seed's manifest (a resume reads it)."""
    expires_at = time.time() + expires_s
    access = PresignedAccess(
        folder_uri=artifacts.uri(folder),
        seed_url=artifacts.presigned_url(seed_key, "GET", expires_s),
        put_urls={name: artifacts.presigned_url(f"{folder}/{name}", "PUT", expires_s) for name in POD_WRITES},
        expires_at=expires_at,
        seed_manifest_url=artifacts.presigned_url(seed_manifest_key, "GET", expires_s)
        if seed_manifest_key
        else None,
        checkpoint_urls={
            name: {
                method: artifacts.presigned_url(f"{checkpoints}/{name}", method, expires_s)
                for method in ("GET", "PUT")
            }
            for name in CHECKPOINT_FILES
        }
        if checkpoints
        else {},
    )
    return artifacts.presigned_url(f"{folder}/{INPUT_NAME}", "GET", expires_s), access


def _is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def _without_query(url: str) -> str:
    return url.split("?", 1)[0]  # the signature stays out of messages and logs


def _refusal(what: str, response: httpx.Response) -> str:
    """``what``: HTTP status, the S3 error code and message, and what an expiry means."""
    code = re.search(r"<Code>([^<]*)</Code>", response.text)
    message = re.search(r"<Message>([^<]*)</Message>", response.text)
    detail = ": ".join(m.group(1) for m in (code, message) if m) or response.text.strip()[:200]
    text = f"{what}: HTTP {response.status_code} {detail}".rstrip(": ")
    if code and code.group(1) in ("ExpiredToken", "TokenRefreshRequired"):
        # A URL signed with temporary credentials (STS, IRSA, an instance profile) dies with
        # them, whatever its own expiry says (docs/deploy.md, "Presigned URLs").
        text += " (the worker's temporary credentials that signed the attempt's URLs expired)"
    elif "request has expired" in response.text.lower():
        text += " (the attempt's presigned URLs expired: it ran past its Job's deadline)"
    return text


def load_input(uri: str) -> tuple[PodTrialInput, ArtifactStore]:
    """Read the trial input at ``uri`` (an fsspec URL, or a presigned http(s) URL);
    AtollError(bad_trial_input) when absent or invalid."""
    import fsspec

    try:
        if _is_http(uri):
            response = httpx.get(uri, timeout=httpx.Timeout(60.0, connect=10.0))
            if response.status_code != 200:
                raise AtollError("bad_trial_input", _refusal(f"trial input {_without_query(uri)}", response))
            trial_input = PodTrialInput.model_validate_json(response.content)
        else:
            with fsspec.open(uri, "rb") as handle:
                trial_input = PodTrialInput.model_validate_json(handle.read())
    except (OSError, ValueError, httpx.HTTPError) as exc:
        where = _without_query(uri)
        raise AtollError("bad_trial_input", f"trial input {where}: {str(exc).splitlines()[0]}") from None
    return trial_input, ArtifactStore(trial_input.artifacts)


class _Folder(Protocol):
    """Where a trial pod reads its seed from and writes its files to."""

    def get_seed(self, target: Path) -> None: ...

    def store(self, trajectory: Trajectory, grade: Grade | None, after: Path) -> dict[str, str | None]: ...

    def delta_base(self) -> str:
        """The seed manifest's key as seen from the attempt's folder (a delta's ``base``)."""
        ...

    def put_outcome(self, data: bytes) -> None: ...

    def put(self, name: str, data: bytes | Path) -> str:
        """Write one file of the folder (the trajectory so far, a failure's evidence); its URI."""
        ...

    def seed_uri(self) -> str:
        """The URI of the seed's manifest: the trial's initial state."""
        ...

    def get_seed_manifest(self) -> bytes:
        """The seed's manifest (a resume rebuilds the checkpoint's world on it)."""
        ...

    def checkpoint_store(self, spec: TrialSpec) -> ArtifactStore | PresignedCheckpointStore | None:
        """What reaches the trial's checkpoint folder; None: nothing can (no URLs for it)."""
        ...


class _StoreFolder:
    """The attempt's folder in an fsspec store, reached with the pod's own credentials."""

    def __init__(self, artifacts: ArtifactStore, prefix: str, trial_input: PodTrialInput) -> None:
        self.artifacts, self.prefix = artifacts, prefix
        self.seed_key, self.manifest_key = trial_input.seed_key, trial_input.seed_manifest_key

    def get_seed(self, target: Path) -> None:
        try:
            self.artifacts.get_file(self.artifacts.uri(self.seed_key), target)
        except OSError as exc:
            raise InfraError(f"seed {self.seed_key}: {exc}") from exc

    def get_seed_manifest(self) -> bytes:
        try:
            return self.artifacts.get_bytes(self.manifest_key)
        except OSError as exc:
            raise InfraError(f"seed manifest {self.manifest_key}: {exc}") from exc

    def checkpoint_store(self, spec: TrialSpec) -> ArtifactStore | PresignedCheckpointStore | None:
        return self.artifacts

    def store(self, trajectory: Trajectory, grade: Grade | None, after: Path) -> dict[str, str | None]:
        return steps.store_artifacts(
            self.artifacts, self.prefix, trajectory, grade, after, before_uri=self.seed_uri()
        )

    def delta_base(self) -> str:
        return relative_reference(f"{self.prefix}/{AFTER_NAME}", self.manifest_key)

    def put_outcome(self, data: bytes) -> None:
        self.artifacts.put_bytes(f"{self.prefix}/{OUTCOME_NAME}", data)

    def put(self, name: str, data: bytes | Path) -> str:
        key = f"{self.prefix}/{name}"
        return (
            self.artifacts.put_file(key, data)
            if isinstance(data, Path)
            else self.artifacts.put_bytes(key, data)
        )

    def seed_uri(self) -> str:
        return self.artifacts.uri(self.manifest_key)


class _PresignedFolder:
    """The attempt's folder through its presigned URLs only (plain HTTP, no credentials)."""

    def __init__(self, access: PresignedAccess, artifacts: ArtifactStore, trial_input: PodTrialInput) -> None:
        self.access = access
        self.artifacts = artifacts
        self._seed_archive_uri = artifacts.uri(trial_input.seed_key)
        self._seed_uri = artifacts.uri(trial_input.seed_manifest_key)
        folder = artifacts.key_of(access.folder_uri) or ""
        self._delta_base = relative_reference(f"{folder}/{AFTER_NAME}", trial_input.seed_manifest_key)
        self.timeout = httpx.Timeout(600.0, connect=10.0)

    def get_seed(self, target: Path) -> None:
        try:
            with httpx.stream("GET", self.access.seed_url, timeout=self.timeout) as response:
                if response.status_code != 200:
                    response.read()
                    raise InfraError(_refusal(f"seed {self._seed_archive_uri}", response))
                with open(target, "wb") as handle:
                    for block in response.iter_bytes(1 << 20):
                        handle.write(block)
        except httpx.HTTPError as exc:
            raise InfraError(f"seed {self._seed_archive_uri}: {exc}") from exc

    def get_seed_manifest(self) -> bytes:
        if self.access.seed_manifest_url is None:
            raise InfraError(f"the trial input has no presigned URL for the seed manifest {self._seed_uri}")
        try:
            response = httpx.get(self.access.seed_manifest_url, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise InfraError(f"seed manifest {self._seed_uri}: {exc}") from exc
        if response.status_code != 200:
            raise InfraError(_refusal(f"seed manifest {self._seed_uri}", response))
        return response.content

    def checkpoint_store(self, spec: TrialSpec) -> ArtifactStore | PresignedCheckpointStore | None:
        if not self.access.checkpoint_urls:
            return None
        folder = checkpoint_folder(spec)
        return PresignedCheckpointStore(folder, self.artifacts.uri(folder), self.access.checkpoint_urls)

    def _put(self, name: str, data: bytes | Path) -> str:
        """PUT ``data`` (bytes, or a file streamed from disk with its Content-Length, which a
        presigned PUT needs: a snapshot may be larger than the pod's memory)."""
        url = self.access.put_urls.get(name)
        if url is None:
            raise InfraError(f"the trial input has no presigned URL for {name}")
        try:
            if isinstance(data, Path):
                with data.open("rb") as handle:
                    response = httpx.put(url, content=handle, timeout=self.timeout)
            else:
                response = httpx.put(url, content=data, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise InfraError(f"{self.access.folder_uri}/{name}: {exc}") from exc
        if response.status_code >= 300:
            raise InfraError(_refusal(f"{self.access.folder_uri}/{name}", response))
        return f"{self.access.folder_uri}/{name}"

    def store(self, trajectory: Trajectory, grade: Grade | None, after: Path) -> dict[str, str | None]:
        # The worker stored the seed before presigning its URL: it is the initial state.
        return {
            "trajectory_uri": self._put(TRAJECTORY_NAME, model_json(trajectory, indent=2).encode()),
            "grade_uri": self._put(GRADE_NAME, model_json(grade, indent=2).encode()) if grade else None,
            "snapshot_before_uri": self._seed_uri,
            "snapshot_after_uri": self._put(after.name, after),
        }

    def put(self, name: str, data: bytes | Path) -> str:
        return self._put(name, data)

    def delta_base(self) -> str:
        return self._delta_base

    def seed_uri(self) -> str:
        return self._seed_uri

    def put_outcome(self, data: bytes) -> None:
        try:
            self._put(OUTCOME_NAME, data)
        except InfraError as exc:  # nothing can be recorded: the pod fails with this line
            raise AtollError("outcome_not_written", f"outcome not written: {exc}") from None


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
    folder: _Folder
    if trial_input.presigned is not None:
        folder = _PresignedFolder(trial_input.presigned, artifacts, trial_input)
    else:
        prefix = _folder_of(artifacts, input_uri, trial_input.spec, trial_input.attempt)
        folder = _StoreFolder(artifacts, prefix, trial_input)
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
    folder: _Folder,
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
    folder.get_seed(before)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0)) as http:
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
        # Checkpoints: the same path as the local executor's, through the store or its presigned URLs.
        store = folder.checkpoint_store(spec) if trial_input.checkpoint is not None else None
        policy = trial_input.checkpoint if store is not None else None
        resume, refused, seed_manifest = None, None, None
        if policy is not None and store is not None:
            resume, refused = await asyncio.to_thread(
                read_latest, store, spec, trial_input.seed_digest, scratch
            )
        if resume is not None and store is not None:
            try:
                seed_manifest = WorldManifest.from_bytes(
                    await asyncio.to_thread(folder.get_seed_manifest), trial_input.seed_manifest_key
                )
            except AtollError as exc:  # InfraError is raised as it is
                if isinstance(exc, InfraError):
                    raise
                raise InfraError(f"seed manifest {trial_input.seed_manifest_key}: {exc.message}") from exc
            refused = await populate_checkpoint(
                resume, seed_manifest, steps.archive_reader(before), scratch, prepare
            )
            resume = None if refused else resume
        if resume is None:
            populated = await prepare(seed_digest=trial_input.seed_digest, seed_archive=before)
        else:
            assert seed_manifest is not None
            populated = seed_manifest  # the trial's initial state stays the seed
        progress.before_uri = folder.seed_uri
        base_manifest = seed_manifest.model_dump(mode="json", exclude_none=True) if resume else None
        writer = None
        if policy is not None and store is not None:

            async def take_delta(path: Path, base: str) -> Path:
                body = steps.delta_request(base, trial_input.seed_digest, base_manifest)
                return await steps.take_world_delta(http, environment, path, body)

            writer = CheckpointWriter(
                store,
                spec,
                attempt=trial_input.attempt,
                seed_digest=trial_input.seed_digest,
                seed_manifest_key=trial_input.seed_manifest_key,
                take_delta=take_delta,
                scratch=scratch,
                latest=resume.latest if resume is not None else None,
            )
        try:
            trajectory = await steps.run_agent_in_process(
                environment,
                task,
                spec,
                on_change=progress.observe,
                checkpoint=policy,
                on_checkpoint=writer,
                resume=resume.agent if resume is not None else None,
                attempt=trial_input.attempt,
            )
        finally:
            if writer is not None:
                await writer.drain()
        if refused:
            trajectory = trajectory.model_copy(update={"resume_refused": refused})
        progress.trajectory = trajectory
        after = progress.after = await steps.take_final_state(
            http,
            environment,
            scratch,
            base=folder.delta_base(),
            base_digest=trial_input.seed_digest,
            base_manifest=base_manifest,
        )
    steps.raise_for_infrastructure(trajectory)
    await progress.stop()
    grade = None
    if steps.should_grade(trajectory, trial_input.grade_incomplete):
        snapshots = steps.trial_snapshots(populated, steps.archive_reader(before), after)
        grade = await _grade(trial_input, snapshots, scratch, trajectory, grader_url, grader_token)
    uris = folder.store(trajectory, grade, after)
    return steps.build_result(
        spec,
        task,
        trajectory,
        grade,
        attempt=trial_input.attempt,
        duration_s=progress.elapsed_s,
        uris=uris,
    )


async def _grade(
    trial_input: PodTrialInput,
    snapshots: tuple[ManifestSnapshot, ManifestSnapshot],
    scratch: Path,
    trajectory: Trajectory,
    grader_url: str | None,
    grader_token: str | None,
) -> Grade:
    before, after = snapshots
    if grader_url:  # the grading service takes full archives
        before_path = steps.write_full_archive(before, scratch / "graded-before.tar.gz")
        after_path = steps.write_full_archive(after, scratch / "graded-after.tar.gz")
        return await steps.grade_with_service(
            grader_url,
            trial_input.task,
            before_path,
            after_path,
            trajectory,
            trial_input.judge,
            token=grader_token,
        )
    from grader import grade_trial

    judge = judge_from_request(trial_input.judge)
    try:
        return await grade_trial(
            trial_input.task, before, after, trajectory, judge, None, trial_id=trial_input.spec.trial_id
        )
    except AtollError as exc:
        raise steps.grader_failure(exc) from exc


__all__ = [
    "POD_WRITES",
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
