"""Where a trial pod reads its seed from and writes its files to: its attempt's folder.

Two ways in, one interface (:class:`AttemptFolder`):

- :class:`StoreFolder`: any fsspec store the pod reaches with its own credentials (``file://``
  for local and kind use).
- :class:`PresignedFolder`: an S3 store the pod holds no credentials for. The worker presigns
  (:func:`presign_attempt`) a GET of the seed (and of its manifest, which a resume reads), one
  PUT per file the pod writes (:data:`POD_WRITES`) and a GET and a PUT of each file of the
  trial's checkpoint folder, all expiring with the Job's deadline; the input carries them as
  :class:`PresignedAccess`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Protocol

import httpx
from pydantic import BaseModel, Field

from atoll.errors import AtollError, ErrorCode
from atoll.grade import Grade
from atoll.jsonio import model_json
from atoll.trajectory import Trajectory
from atoll.trial import TrialSpec
from atoll.world_store import relative_reference
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors import steps
from orchestrator.executors.base import InfraError
from orchestrator.executors.checkpoints import checkpoint_folder
from orchestrator.executors.evidence import AFTER_NAME, ATIF_NAME, FULL_AFTER_NAME
from orchestrator.executors.presigned_checkpoints import (
    CHECKPOINT_FILES,
    PresignedCheckpointStore,
    put_presigned,
)

INPUT_NAME = "input.json"
OUTCOME_NAME = "outcome.json"
TRAJECTORY_NAME = "trajectory.json"
GRADE_NAME = "grade.json"
POD_WRITES = (
    OUTCOME_NAME,
    TRAJECTORY_NAME,
    ATIF_NAME,
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


def is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def without_query(url: str) -> str:
    return url.split("?", 1)[0]  # the signature stays out of messages and logs


def refusal(what: str, response: httpx.Response) -> str:
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


class AttemptFolder(Protocol):
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


class StoreFolder:
    """The attempt's folder ``prefix`` in an fsspec store, reached with the pod's own credentials."""

    def __init__(
        self, artifacts: ArtifactStore, prefix: str, *, seed_key: str, seed_manifest_key: str
    ) -> None:
        self.artifacts, self.prefix = artifacts, prefix
        self.seed_key, self.manifest_key = seed_key, seed_manifest_key

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


class PresignedFolder:
    """The attempt's folder through its presigned URLs only (plain HTTP, no credentials)."""

    def __init__(
        self, access: PresignedAccess, artifacts: ArtifactStore, *, seed_key: str, seed_manifest_key: str
    ) -> None:
        self.access = access
        self.artifacts = artifacts
        self._seed_archive_uri = artifacts.uri(seed_key)
        self._seed_uri = artifacts.uri(seed_manifest_key)
        folder = artifacts.key_of(access.folder_uri) or ""
        self._delta_base = relative_reference(f"{folder}/{AFTER_NAME}", seed_manifest_key)
        self.timeout = httpx.Timeout(600.0, connect=10.0)

    def get_seed(self, target: Path) -> None:
        try:
            with httpx.stream("GET", self.access.seed_url, timeout=self.timeout) as response:
                if response.status_code != 200:
                    response.read()
                    raise InfraError(refusal(f"seed {self._seed_archive_uri}", response))
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
            raise InfraError(refusal(f"seed manifest {self._seed_uri}", response))
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
            response = put_presigned(url, data, self.timeout)
        except httpx.HTTPError as exc:
            raise InfraError(f"{self.access.folder_uri}/{name}: {exc}") from exc
        if response.status_code >= 300:
            raise InfraError(refusal(f"{self.access.folder_uri}/{name}", response))
        return f"{self.access.folder_uri}/{name}"

    def store(self, trajectory: Trajectory, grade: Grade | None, after: Path) -> dict[str, str | None]:
        # The worker stored the seed before presigning its URL: it is the initial state.
        # atif.json only where the worker presigned it (an input made before it existed has none).
        atif = steps.atif_bytes(trajectory) if ATIF_NAME in self.access.put_urls else None
        if atif is not None:
            self._put(ATIF_NAME, atif)
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
            raise AtollError(ErrorCode.outcome_not_written, f"outcome not written: {exc}") from None


__all__ = [
    "GRADE_NAME",
    "INPUT_NAME",
    "OUTCOME_NAME",
    "POD_WRITES",
    "PRESIGN_MARGIN_S",
    "TRAJECTORY_NAME",
    "AttemptFolder",
    "PresignedAccess",
    "PresignedFolder",
    "StoreFolder",
    "is_http",
    "presign_attempt",
    "refusal",
    "without_query",
]
