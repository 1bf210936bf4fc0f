"""Where trial artifacts go: a local directory or any fsspec URL (s3://bucket/prefix …).

Layout: ``<root>/<experiment>/<task>/<agent>/run-<n>/attempt-<k>/{trial.json,
trajectory.json,atif.json,grade.json,after.delta.tar.gz}`` (the final state is a delta on the seed; the
initial state is the seed's, stored once by content under ``seeds/`` and ``blobs/``: see
:mod:`atoll.world_store`). Each name is made a safe, readable path segment (:func:`path_segment`);
``trial.json`` names the trial the folder belongs to, and a folder already claimed by another
trial (an earlier configuration of the run, archived by ``--replace``) is never reused: the
new trial's folder gets its id appended (:func:`claim_trial_folder`). Runs recorded before
this layout have ``<experiment>/<trial_id>/attempt-<n>/``; every reader goes through the
artifact URIs recorded in the store, so both layouts read alike.

Writes go to a temporary name first, then are moved into place, so a crash never leaves a
half-written artifact under its final name.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import fsspec

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import dumps_strict

if TYPE_CHECKING:
    from atoll.trial import TrialSpec
    from grader.snapshot import ManifestSnapshot, Snapshot

TRIAL_FILE = "trial.json"
PRESIGN_MAX_S = 7 * 24 * 3600  # the longest a SigV4 presigned URL may live
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def read_artifact(uri: str) -> bytes:
    """The bytes of an artifact URI recorded in the store (file://, s3:// or any fsspec URL);
    AtollError("artifact_unreadable") naming the URI when it cannot be read."""
    try:
        with fsspec.open(uri, "rb") as handle:
            return handle.read()
    except (OSError, ValueError) as exc:
        raise AtollError(ErrorCode.artifact_unreadable, f"artifact {uri}: {exc}") from None


def is_relative_url(url: str) -> bool:
    """Whether an artifacts URL names a local folder relative to some working folder
    (``atoll-out/artifacts``, ``file://atoll-out/artifacts``)."""
    if "://" not in url:
        return not os.path.isabs(url)
    return url.startswith("file://") and not url.startswith("file:///")


def absolute_url(url: str, base: str | os.PathLike[str] | None = None) -> str:
    """``url`` with a relative local folder made absolute against ``base`` (default: the
    working folder); any other URL as it is. A run records its artifacts URL so, when it is
    submitted, so that a viewer or worker started in another folder finds the same files."""
    if not is_relative_url(url):
        return "file://" + os.path.abspath(url) if "://" not in url else url
    relative = url.removeprefix("file://")
    return "file://" + os.path.abspath(os.path.join(os.fspath(base or os.getcwd()), relative))


class ArtifactStore:
    def __init__(self, url: str, *, storage_options: dict | None = None) -> None:
        url = absolute_url(url)
        self.url = url.rstrip("/")
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            raise AtollError(ErrorCode.bad_artifact_store, f"artifact store {url}: {exc}") from None

    def _full(self, key: str) -> str:
        return f"{self.root}/{key}"

    def full_path(self, key: str) -> str:
        """``key``'s path on the store's filesystem (:attr:`fs`)."""
        return self._full(key)

    def uri(self, key: str) -> str:
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return f"{protocol}://{self._full(key)}"

    def exists(self, key: str) -> bool:
        return self.fs.exists(self._full(key))

    def put_bytes(self, key: str, data: bytes) -> str:
        path = self._full(key)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        partial = path + ".partial"
        with self.fs.open(partial, "wb") as handle:
            handle.write(data)
        self.fs.mv(partial, path)
        return self.uri(key)

    def put_file(self, key: str, local_path: str | Path) -> str:
        path = self._full(key)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(local_path), path + ".partial")
        self.fs.mv(path + ".partial", path)
        return self.uri(key)

    def key_of(self, uri: str) -> str | None:
        """The key of ``uri`` in this store, or None when the URI lies outside it."""
        prefix = self.uri("")
        return uri[len(prefix) :] if uri.startswith(prefix) and len(uri) > len(prefix) else None

    def get_bytes(self, key_or_uri: str) -> bytes:
        """The bytes of an artifact given by key (relative to this store) or full URI."""
        uri = key_or_uri if "://" in key_or_uri else self.uri(key_or_uri)
        with fsspec.open(uri, "rb") as handle:
            return handle.read()

    @property
    def presigns(self) -> bool:
        """Whether :meth:`presigned_url` can give URLs: the store is S3 (``s3://``)."""
        return type(self.fs).__name__ == "S3FileSystem"

    def presigned_url(self, key: str, method: str, expires_s: float) -> str:
        """A SigV4 presigned URL that lets its holder, without credentials, GET or PUT exactly
        ``key`` for ``expires_s`` seconds (at most 7 days, S3's limit). S3 stores only
        (:attr:`presigns`); AtollError(no_presigned_urls) for others."""
        if not self.presigns:
            raise AtollError(
                ErrorCode.no_presigned_urls, f"artifact store {self.url}: presigned URLs need s3://"
            )
        client_method = {"GET": "get_object", "PUT": "put_object"}[method]
        expires = max(1, min(int(expires_s), PRESIGN_MAX_S))
        return self._signer.url(self._full(key), expires=expires, client_method=client_method)

    @functools.cached_property
    def _signer(self) -> fsspec.AbstractFileSystem:
        """The store's filesystem configured to sign with SigV4 whatever the store's own
        setting (the legacy signature is refused by most regions); made once per store."""
        options = dict(self.fs.storage_options)
        options["config_kwargs"] = {**(options.get("config_kwargs") or {}), "signature_version": "s3v4"}
        return type(self.fs)(**options)

    def get_file(self, uri: str, local_path: str | Path) -> Path:
        with fsspec.open(uri, "rb") as source, open(local_path, "wb") as target:
            while block := source.read(1 << 20):
                target.write(block)
        return Path(local_path)


@contextlib.contextmanager
def stored_snapshots(artifacts: ArtifactStore, *uris: str) -> Iterator[list[Snapshot | ManifestSnapshot]]:
    """The snapshots at ``uris`` (artifact URIs of a trial), opened for grading: a stored world
    (a seed manifest or a trial's delta) is read in place under this store's root, so only the
    blobs of changed files are fetched; a full archive (the layout before world storage) is
    downloaded to a temporary folder. All are closed, and their files removed, on exit."""
    from atoll.world_store import store_root_for, world_kind
    from grader.snapshot import Snapshot, open_snapshot

    with tempfile.TemporaryDirectory(prefix="atoll-snapshots-") as scratch, contextlib.ExitStack() as stack:
        opened: list[Snapshot | ManifestSnapshot] = []
        for index, uri in enumerate(uris):
            if world_kind(uri) == "archive":
                local = artifacts.get_file(uri, Path(scratch) / f"{index}.snapshot")
                opened.append(stack.enter_context(Snapshot(local)))
            else:
                root = store_root_for(uri, artifacts.url)
                snapshot = open_snapshot(uri, root=root)
                stack.enter_context(snapshot)  # returns the snapshot itself
                opened.append(snapshot)
        yield opened


def path_segment(name: str) -> str:
    """``name`` as one readable path segment: runs of anything but letters, digits, ``.``,
    ``_`` and ``-`` become ``_`` and leading/trailing dots, dashes and underscores go (so no
    ``..``, no ``/``, no hidden file). A name that had to change gets the first 8 hex digits
    of its sha256 appended, so two names that clean up alike ("a/b", "a b") stay apart."""
    cleaned = _UNSAFE.sub("_", name).strip("._-")[:80]
    if cleaned == name and cleaned:
        return cleaned
    return f"{cleaned or 'x'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def trial_prefix(spec: TrialSpec, attempt: int) -> str:
    """The readable folder of a trial's attempt: ``<experiment>/<task>/<agent>/run-<n>/attempt-<k>``."""
    parts = (spec.experiment, spec.task_id, spec.agent_name)
    return "/".join(path_segment(part) for part in parts) + f"/run-{spec.run_index}/attempt-{attempt}"


def _folder_candidates(spec: TrialSpec, attempt: int) -> tuple[str, ...]:
    base = trial_prefix(spec, attempt)
    return (base, f"{base}-{spec.trial_id[:12]}", f"{base}-{spec.trial_id}")


def find_trial_folder(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str | None:
    """The folder :func:`claim_trial_folder` gave this trial's attempt, or None when it has
    none (yet); claims nothing. Unreadable or foreign ``trial.json`` files are passed over."""
    for prefix in _folder_candidates(spec, attempt):
        key = f"{prefix}/{TRIAL_FILE}"
        try:
            if not artifacts.exists(key):
                return None
            if json.loads(artifacts.get_bytes(key)).get("trial_id") == spec.trial_id:
                return prefix
        except (OSError, ValueError, AttributeError):
            continue
    return None


def claim_trial_folder(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> str:
    """The folder (key prefix) this attempt's artifacts go to, with its ``trial.json``
    written: :func:`trial_prefix`, unless another trial already holds that folder, then the
    same with ``-<trial id>`` appended. Idempotent: the same trial and attempt get the same
    folder every time (the Kubernetes executor and its pod both ask). A ``trial.json`` that
    cannot be read raises (OSError, or AtollError ``artifact_folder_unreadable`` when it is not
    a trial record) rather than count as another trial's."""
    from atoll.trial import identity_config

    trial_id = spec.trial_id
    base = trial_prefix(spec, attempt)
    for prefix in _folder_candidates(spec, attempt):
        key = f"{prefix}/{TRIAL_FILE}"
        if artifacts.exists(key):
            # A read that fails (OSError) is raised, not taken for another trial's folder: the
            # executor and its pod must not pick different folders on a passing error.
            data = artifacts.get_bytes(key)
            try:
                holder = json.loads(data).get("trial_id")
            except (ValueError, AttributeError) as exc:
                raise AtollError(
                    ErrorCode.artifact_folder_unreadable,
                    f"{artifacts.uri(key)} is not a trial record ({str(exc).splitlines()[0]}); "
                    "move it aside to let this trial use the folder",
                ) from None
            if holder == trial_id:
                return prefix
            continue
        record = {
            "trial_id": trial_id,
            "experiment": spec.experiment,
            "task_id": spec.task_id,
            "agent": spec.agent_name,
            "model": spec.model,
            "run_index": spec.run_index,
            "attempt": attempt,
            # The spec without keys, endpoints or headers (artifact stores are shared more widely).
            "spec": {**spec.model_dump(mode="json"), "agent_config": identity_config(spec.agent_config)},
        }
        artifacts.put_bytes(key, (dumps_strict(record, indent=2) + "\n").encode())
        return prefix
    raise AtollError(
        ErrorCode.artifact_folder_taken, f"artifact folder {base} and its fallbacks are held by other trials"
    )
