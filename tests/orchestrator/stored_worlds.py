"""Small factories for runs whose worlds are stored by content: blobs and seed manifests
written in the artifact store's layout (orchestrator.world_gc), trials enqueued, leased and
completed in a real store with result URIs that point at real attempt folders."""

from __future__ import annotations

import gzip
import io
import os
import time
from dataclasses import dataclass, field

from atoll.trial import Outcome, TrialResult, TrialSpec
from atoll.world_deltas import write_delta
from atoll.world_manifest import Entry, WorldManifest, sha256_of
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors.seeds import seed_key
from orchestrator.store import TrialStore

DAY = 24 * 3600.0


def blob_key(content: bytes) -> str:
    digest = sha256_of(content)
    return f"blobs/sha256/{digest[:2]}/{digest}"


def manifest_of(files: dict[str, bytes], **fields) -> WorldManifest:
    entries = [Entry(path="filesystem", type="dir")]
    entries += [
        Entry(path=f"filesystem/{name}", type="file", size=len(data), sha256=sha256_of(data))
        for name, data in sorted(files.items())
    ]
    return WorldManifest(entries=entries, **fields)


def store_seed(artifacts: ArtifactStore, spec: TrialSpec, files: dict[str, bytes]) -> str:
    """Store the world ``files`` as the seed of ``spec``'s trials; returns the manifest's key."""
    for data in files.values():
        artifacts.put_bytes(blob_key(data), gzip.compress(data))
    key = f"seeds/{seed_key(spec)}.manifest.json"
    artifacts.put_bytes(key, manifest_of(files, blobs="../blobs/sha256").to_bytes())
    return key


def spec_for(run: str, task: str, world: str, index: int = 0) -> TrialSpec:
    return TrialSpec(
        experiment=run,
        task_id=task,
        world_id=world,
        world_digest=f"digest-of-{world}",
        agent_name="a",
        agent="replay",
        model="replay",
        run_index=index,
    )


@dataclass
class StoredRun:
    name: str
    specs: list[TrialSpec]
    folders: list[str] = field(default_factory=list)  # attempt folder keys


def run_trials(
    store: TrialStore,
    artifacts: ArtifactStore,
    name: str,
    specs: list[TrialSpec],
    worlds: dict[str, dict[str, bytes]],
    *,
    changed: bytes = b"the agent's edit",
) -> StoredRun:
    """Record the run, store each world's seed, and run every trial: an attempt folder with
    trial.json, trajectory.json, grade.json and an after-state delta (its blob: ``changed``
    plus the trial id) whose base is the seed manifest; the result names them all."""
    store.save_experiment(name, {"name": name, "artifacts": artifacts.url})
    seeds = {spec.world_id: store_seed(artifacts, spec, worlds[spec.world_id]) for spec in specs}
    store.enqueue(specs)
    run = StoredRun(name, specs)
    for lease in store.lease("w", limit=len(specs), lease_s=60, experiment=name):
        folder = claim_trial_folder(artifacts, lease.spec, lease.attempt)
        run.folders.append(folder)
        after_files = {**worlds[lease.spec.world_id], "edit.txt": changed + lease.trial_id.encode()}
        base = "../" * (folder.count("/") + 1) + seeds[lease.spec.world_id]
        sink = io.BytesIO()
        edit = after_files["edit.txt"]
        write_delta(
            manifest_of(after_files, base=base), [(sha256_of(edit), io.BytesIO(edit), len(edit))], sink
        )
        result = TrialResult(
            trial_id=lease.trial_id,
            outcome=Outcome.passed,
            score=1.0,
            attempt=lease.attempt,
            trajectory_uri=artifacts.put_bytes(f"{folder}/trajectory.json", b"{}"),
            grade_uri=artifacts.put_bytes(f"{folder}/grade.json", b"{}"),
            snapshot_before_uri=artifacts.uri(seeds[lease.spec.world_id]),
            snapshot_after_uri=artifacts.put_bytes(f"{folder}/after.delta.tar.gz", sink.getvalue()),
        )
        assert store.complete(lease, "w", result)
    return run


def age_everything(root: str, seconds: float = 2 * DAY) -> None:
    """Make every file under a local store ``seconds`` old (as if written then)."""
    past = time.time() - seconds
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))
