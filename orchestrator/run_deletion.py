"""Deleting a run for good (``atoll delete``, ``DELETE /runs/{name}``): its rows in the trial
store, the artifact folders its results point to, then the stored worlds nothing uses any more
(:mod:`orchestrator.world_gc`). A trial's checkpoint folder (``checkpoints-<trial id>``, beside
its attempt folders in its run folder) goes with its attempts.

Only a run with no trial pending or leased may go (cancel it first: ``atoll cancel --stop``);
the check and the removal of its rows are one transaction
(:meth:`orchestrator.store_delete.RunDeletions.delete_run_rows`). Its rows go first, so no
worker leases anything of it while its folders are removed. A folder is removed only when it
lies inside the run's artifact store, under the run's own folder there and outside ``seeds/``
and ``blobs/``; any other URI a result names is left where it is and reported. The seed a
result's ``snapshot_before_uri`` names is shared with other runs: only the collector removes
seeds, and only those no trial in the store uses.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from atoll.defaults import DEFAULT_ARTIFACTS
from atoll.errors import AtollError, ErrorCode
from atoll.experiment import check_run_name
from orchestrator.world_gc import DEFAULT_GRACE_HOURS, GcReport, collect_garbage, path_in

if TYPE_CHECKING:
    from atoll.trial import TrialResult
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.store import TrialStore


class RunDeletion(BaseModel):
    """``DELETE /runs/{name}``: what deleting the run removed."""

    name: str
    rows: dict[str, int] = Field(description="rows removed from the trial store, by table")
    artifacts: str = Field(description="the run's artifact store")
    folders: list[str] = Field(description="URIs of the trial artifact folders removed")
    folder_bytes: int = Field(description="bytes in those folders")
    left: list[str] = Field(
        description="artifact URIs its results name that were not removed: outside the run's "
        "artifact store or its folder there (with why)"
    )
    problems: list[str] = Field(description="folders that could not be removed, and why")
    gc: GcReport | None = Field(description="the garbage collection that followed; null when skipped")


def delete_run(
    store: TrialStore,
    name: str,
    *,
    artifacts: ArtifactStore | None = None,
    gc: bool = True,
    grace_hours: float = DEFAULT_GRACE_HOURS,
) -> RunDeletion:
    """Delete the run (module doc) and, unless ``gc`` is False, collect its store's garbage.
    ``artifacts``: the run's artifact store (default: the one its spec names). AtollError
    ``unknown_run`` (also for a run already deleted), ``bad_run_name``, or ``run_not_active``
    while any trial of it is pending or leased (nothing is removed then)."""
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.lifecycle import run_status

    check_run_name(name)
    record = store.run_record(name)
    if record is None:
        raise AtollError(ErrorCode.unknown_run, f"no run named {name!r} in the store")
    status = run_status(store, name)
    live = status.counts.get("pending", 0) + status.counts.get("leased", 0)
    if live:  # the store checks again in the transaction that deletes (a resume may race this)
        raise AtollError(
            ErrorCode.run_not_active,
            f"run {name!r} is {status.state.value} with {status.counts.get('leased', 0)} trials running "
            f"and {status.counts.get('pending', 0)} pending: nothing to delete while its trials may run; "
            "cancel it first (atoll cancel --stop, or POST /runs/{name}/cancel with in_flight=stop)",
        )
    if artifacts is None:
        artifacts = ArtifactStore(record.spec.get("artifacts") or DEFAULT_ARTIFACTS)
    deleted = store.delete_run_rows(name)
    folders, left = _folders(artifacts, name, deleted.results)
    removed, size, problems = [], 0, []
    for folder in sorted(folders):
        try:
            size += _remove_folder(artifacts, folder)
            removed.append(artifacts.uri(folder))
        except OSError as exc:
            problems.append(f"{artifacts.uri(folder)}: {exc}")
    _remove_empty_parents(artifacts, folders)
    report = collect_garbage(store, artifacts, grace_hours=grace_hours) if gc else None
    return RunDeletion(
        name=name,
        rows=deleted.rows,
        artifacts=artifacts.url,
        folders=removed,
        folder_bytes=size,
        left=sorted(left),
        problems=problems,
        gc=report,
    )


def _folders(artifacts: ArtifactStore, name: str, results: list[TrialResult]) -> tuple[set[str], set[str]]:
    """The run's attempt folders its results point to (keys), and the URIs left, with why."""
    from orchestrator.artifacts import path_segment
    from orchestrator.world_gc import BLOBS, SEEDS, key_inside

    own = {path_segment(name), name}  # today's layout, and the one before it
    folders: set[str] = set()
    left: set[str] = set()
    for result in results:
        for uri in (result.trajectory_uri, result.grade_uri, result.snapshot_after_uri):
            if not uri:
                continue
            key = key_inside(artifacts, uri)
            if key is None:
                left.add(f"{uri} (outside the artifact store {artifacts.url})")
                continue
            folder = posixpath.dirname(key)
            top = folder.split("/", 1)[0]
            if top in (SEEDS, BLOBS) or top not in own or "/" not in folder:
                left.add(f"{uri} (not in the run's folder {path_segment(name)}/ of the artifact store)")
                continue
            folders.add(folder)
            # The trial's checkpoints (orchestrator.executors.checkpoints) beside its attempts.
            checkpoints = f"{posixpath.dirname(folder)}/checkpoints-{result.trial_id[:16]}"
            if artifacts.fs.exists(path_in(artifacts, checkpoints)):
                folders.add(checkpoints)
    return folders, left


def _remove_folder(artifacts: ArtifactStore, folder: str) -> int:
    """Remove one attempt (or checkpoint) folder; the bytes it held (0 when it was gone already)."""
    path = path_in(artifacts, folder)
    artifacts.fs.invalidate_cache(path)
    if not artifacts.fs.exists(path):
        return 0
    size = sum(int(info.get("size") or 0) for info in artifacts.fs.find(path, detail=True).values())
    artifacts.fs.rm(path, recursive=True)
    return size


def _remove_empty_parents(artifacts: ArtifactStore, folders: set[str]) -> None:
    """Folders left empty above the removed ones, up to the run's own (a local store keeps
    empty directories; an object store has none)."""
    parents = {posixpath.dirname(folder) for folder in folders}
    while parents:
        deepest = max(parents, key=lambda parent: parent.count("/"))
        parents.discard(deepest)
        if not deepest:
            continue
        path = path_in(artifacts, deepest)
        try:
            if artifacts.fs.isdir(path) and not artifacts.fs.ls(path):
                artifacts.fs.rmdir(path)
        except OSError:
            continue
        parents.add(posixpath.dirname(deepest))


__all__ = ["RunDeletion", "delete_run"]
