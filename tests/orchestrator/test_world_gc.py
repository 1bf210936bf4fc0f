"""Garbage collection of stored worlds (orchestrator.world_gc, `atoll gc`): seeds of no trial
and blobs of no manifest go once older than the grace period; what a live run, an archived
trial or a result still names stays, on a local store and on S3."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll_cli.cli import app
from orchestrator import world_gc
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.seeds import seed_key
from orchestrator.run_deletion import delete_run
from orchestrator.store import TrialStore
from orchestrator.world_gc import collect_garbage
from tests.orchestrator.stored_worlds import (
    age_everything,
    blob_key,
    manifest_of,
    run_trials,
    spec_for,
    store_seed,
)

WORLD = {"a.txt": b"in both worlds", "b.txt": b"only in the live world"}
GONE = {"a.txt": b"in both worlds", "c.txt": b"only in the orphaned world"}


def _seed_path(artifacts: ArtifactStore, world: str) -> Path:
    return Path(artifacts.root, "seeds", f"{seed_key(spec_for('x', 't', world))}.manifest.json")


def _orphan(artifacts: ArtifactStore) -> None:
    """A seed (and its blobs) of a world no trial in the store uses."""
    store_seed(artifacts, spec_for("x", "t", "gone"), GONE)


def test_an_unused_seed_and_its_unshared_blobs_go_only_once_older_than_the_grace_period(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    run_trials(store, artifacts, "live", [spec_for("live", "t1", "w1")], {"w1": WORLD})
    _orphan(artifacts)
    root = Path(artifacts.root)

    fresh = collect_garbage(store, artifacts)  # everything was just written: all of it stays
    assert fresh.seeds == [] and fresh.blobs == 0 and fresh.kept_young == 1  # the seed (it names c.txt)

    age_everything(artifacts.root)
    dry = collect_garbage(store, artifacts, dry_run=True)
    assert [item.key for item in dry.seeds] == [f"seeds/{_seed_path(artifacts, 'gone').name}"]
    assert dry.blobs == 1 and _seed_path(artifacts, "gone").is_file()  # nothing removed

    report = collect_garbage(store, artifacts)
    assert report.seeds == dry.seeds and report.blobs == 1
    assert report.seed_bytes == _size_of(dry) and report.blob_bytes == dry.blob_bytes > 0
    assert not _seed_path(artifacts, "gone").exists() and not (root / blob_key(GONE["c.txt"])).exists()
    assert _seed_path(artifacts, "w1").is_file()
    for data in WORLD.values():
        assert (root / blob_key(data)).is_file()
    assert collect_garbage(store, artifacts).seeds == []  # nothing left to collect


def _size_of(report) -> int:
    return sum(item.size for item in report.seeds)


def test_archived_trials_and_seeds_named_only_by_a_result_keep_their_worlds(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    run = run_trials(store, artifacts, "live", [spec_for("live", "t1", "w1")], {"w1": WORLD})
    store.archive_trials("live", keep=set(), archive="a1", fingerprint=None)  # no current trial left
    # A result whose seed is one no spec names (a world stored under another key): its
    # before-URI keeps it, and a delta's base keeps the seed it names.
    by_before = store_seed(artifacts, spec_for("x", "t", "before"), {"d.txt": b"named by a before-URI"})
    by_base = store_seed(artifacts, spec_for("x", "t", "base"), {"e.txt": b"named by a delta's base"})
    _result_naming(store, artifacts, run.folders[0], before=by_before, base=by_base)
    age_everything(artifacts.root)

    report = collect_garbage(store, artifacts)

    assert report.seeds == [] and report.blobs == 0, report
    assert report.problems == []
    for world in ("w1", "before", "base"):
        assert _seed_path(artifacts, world).is_file()


def _result_naming(
    store: TrialStore, artifacts: ArtifactStore, folder: str, *, before: str, base: str
) -> None:
    import io

    from atoll.trial import Outcome, TrialResult
    from atoll.world_deltas import write_delta

    spec = spec_for("live", "t9", "w1")
    store.enqueue([spec])
    (lease,) = store.lease("w", limit=1, lease_s=60, experiment="live")
    sink = io.BytesIO()
    write_delta(manifest_of({}, base="../" * (folder.count("/") + 1) + base), [], sink)
    after = artifacts.put_bytes(f"{folder}-delta/after.delta.tar.gz", sink.getvalue())
    store.complete(
        lease, "w", TrialResult(trial_id=lease.trial_id, outcome=Outcome.passed, snapshot_after_uri=after)
    )
    spec = spec_for("live", "t8", "w1")
    store.enqueue([spec])
    (lease,) = store.lease("w", limit=1, lease_s=60, experiment="live")
    before_uri = artifacts.uri(before)
    store.complete(
        lease,
        "w",
        TrialResult(trial_id=lease.trial_id, outcome=Outcome.passed, snapshot_before_uri=before_uri),
    )
    # Neither spec names those seeds: only the results do (their trials' own seed is w1's).
    store.archive_trials("live", keep=set(), archive="a2", fingerprint=None)


def test_a_seed_written_again_while_the_collector_runs_is_kept(store, tmp_path, monkeypatch):
    """A run that reuses a seed writes its manifest again: the time read just before removal
    decides, not the one listed."""
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _orphan(artifacts)
    age_everything(artifacts.root)
    marks = world_gc._marks

    def reused_meanwhile(*args):
        os.utime(_seed_path(artifacts, "gone"))  # after the listing, before the sweep
        return marks(*args)

    monkeypatch.setattr(world_gc, "_marks", reused_meanwhile)
    report = collect_garbage(store, artifacts)

    assert report.seeds == [] and _seed_path(artifacts, "gone").is_file()
    assert report.blobs == 0  # the manifest stays, so do the blobs it names
    assert all((Path(artifacts.root) / blob_key(data)).is_file() for data in GONE.values())


def test_an_unreadable_manifest_stops_the_blob_sweep(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _orphan(artifacts)
    artifacts.put_bytes("elsewhere/broken.manifest.json", b"{not json")
    age_everything(artifacts.root)

    report = collect_garbage(store, artifacts)

    assert len(report.seeds) == 1 and report.blobs == 0
    assert any("broken.manifest.json" in problem for problem in report.problems)
    assert (Path(artifacts.root) / blob_key(GONE["c.txt"])).is_file()


def test_atoll_gc_dry_run_then_for_real_with_every_store_the_runs_name(tmp_path):
    url = f"sqlite:///{tmp_path / 'atoll.db'}"
    store = TrialStore(url)
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    try:
        run_trials(store, artifacts, "live", [spec_for("live", "t1", "w1")], {"w1": WORLD})
    finally:
        store.dispose()
    _orphan(artifacts)
    runner = CliRunner()

    dry = runner.invoke(app, ["gc", "--store", url, "--grace-hours", "0", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would remove 1 seeds" in dry.output and "1 blobs" in dry.output
    assert _seed_path(artifacts, "gone").is_file()

    done = runner.invoke(app, ["gc", "--store", url, "--grace-hours", "0", "--json"])
    assert done.exit_code == 0, done.output
    (report,) = json.loads(done.output)
    assert report["artifacts"] == artifacts.url and len(report["seeds"]) == 1 and report["blobs"] == 1
    assert not _seed_path(artifacts, "gone").exists()


def test_delete_and_gc_on_s3(tmp_path):
    """A real S3 server (SeaweedFS): the deleted run's folders, seed and unshared blobs go;
    the live run's stay."""
    from tests.environment.seaweed import WEED, SeaweedS3

    if not Path(WEED).exists():
        pytest.skip("SeaweedFS (weed) is not installed")
    store = TrialStore(str(tmp_path / "atoll.db"))
    with SeaweedS3(tmp_path / "seaweed") as s3:
        artifacts = ArtifactStore("s3://worlds/store", storage_options=s3.storage_options)
        artifacts.fs.mkdir("worlds")
        old = run_trials(store, artifacts, "old", [spec_for("old", "t1", "gone")], {"gone": GONE})
        live = run_trials(store, artifacts, "live", [spec_for("live", "t1", "w1")], {"w1": WORLD})
        time.sleep(1.1)  # S3 times are whole seconds: every object is now older than the cutoff

        deletion = delete_run(store, "old", artifacts=artifacts, grace_hours=0)

        assert deletion.folders == [artifacts.uri(old.folders[0])]
        assert deletion.gc is not None and len(deletion.gc.seeds) == 1 and deletion.gc.blobs == 1
        exists = artifacts.exists
        artifacts.fs.invalidate_cache()
        assert not exists(f"{old.folders[0]}/trajectory.json") and exists(
            f"{live.folders[0]}/trajectory.json"
        )
        assert not exists(blob_key(GONE["c.txt"])) and exists(blob_key(GONE["a.txt"]))
        assert exists(f"seeds/{seed_key(spec_for('x', 't', 'w1'))}.manifest.json")
        assert not exists(f"seeds/{seed_key(spec_for('x', 't', 'gone'))}.manifest.json")
    store.dispose()


def test_a_seed_stored_while_the_collector_runs_keeps_the_old_blobs_it_names(store, tmp_path, monkeypatch):
    """The manifests are listed again before blobs go: a world stored after the first listing
    that reuses an old blob (it was not written again) keeps it."""
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _orphan(artifacts)
    age_everything(artifacts.root)
    marks = world_gc._marks

    def stored_meanwhile(*args):
        store_seed(artifacts, spec_for("x", "t", "new"), {"c.txt": GONE["c.txt"]})
        os.utime(Path(artifacts.root) / blob_key(GONE["c.txt"]), (0, 0))  # reused, not rewritten
        return marks(*args)

    monkeypatch.setattr(world_gc, "_marks", stored_meanwhile)
    report = collect_garbage(store, artifacts)

    assert len(report.seeds) == 1  # the orphan's manifest
    assert (Path(artifacts.root) / blob_key(GONE["c.txt"])).is_file()
    assert report.blobs == 1 and not (Path(artifacts.root) / blob_key(GONE["a.txt"])).exists()


def test_worlds_stored_by_the_world_store_are_collected_in_its_layout(store, tmp_path):
    """atoll.world_store writes the layout the collector reads: a seed it stored is kept while
    a trial uses it and goes, with its blobs, once none does."""
    import io

    from atoll.world_store import seed_manifest_key, store_world

    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    files = {"x.txt": b"stored by the world store", "y.txt": b"and this"}
    spec = spec_for("live", "t1", "stored")
    key = seed_manifest_key(seed_key(spec))
    contents = {f"filesystem/{name}": data for name, data in files.items()}
    store_world(artifacts, key, manifest_of(files), lambda entry: io.BytesIO(contents[entry.path]))
    store.save_experiment("live", {"name": "live"})
    store.enqueue([spec])
    age_everything(artifacts.root)

    kept = collect_garbage(store, artifacts)
    assert kept.seeds == [] and kept.blobs == 0 and kept.problems == []

    store.archive_trials("live", keep=set(), archive="a1", fingerprint=None)
    assert collect_garbage(store, artifacts).seeds == []  # an archived trial still uses it
    store.delete_run_rows("live")
    report = collect_garbage(store, artifacts)
    assert [item.key for item in report.seeds] == [key] and report.blobs == 2
    assert not [path for path in Path(artifacts.root).rglob("*") if path.is_file()]


def test_a_run_submitted_while_the_collector_runs_keeps_its_old_seed(store, tmp_path, monkeypatch):
    """Its trials are in the store before any worker uses the seed (whose manifest is old and
    is not written again): the store is marked again just before seeds go."""
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _orphan(artifacts)
    age_everything(artifacts.root)
    marks = world_gc._marks
    calls = []

    def submitted_meanwhile(*args):
        marked = marks(*args)
        if not calls:
            store.save_experiment("new", {"name": "new"})
            store.enqueue([spec_for("new", "t1", "gone")])
        calls.append(1)
        return marked

    monkeypatch.setattr(world_gc, "_marks", submitted_meanwhile)
    report = collect_garbage(store, artifacts)

    assert report.seeds == [] and report.blobs == 0 and _seed_path(artifacts, "gone").is_file()


def test_a_crashed_writers_half_written_files_go_once_older_than_the_grace_period(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    run_trials(store, artifacts, "live", [spec_for("live", "t1", "w1")], {"w1": WORLD})
    torn = f"{blob_key(b'never finished')}.0123abcd.partial"
    artifacts.put_bytes(torn, b"half")
    age_everything(artifacts.root)
    artifacts.put_bytes("seeds/0123456789abcdef01234567.manifest.json.feed.partial", b"being written")

    report = collect_garbage(store, artifacts)

    assert report.partials == 1 and report.partial_bytes == 4
    assert not (Path(artifacts.root) / torn).exists()
    assert (Path(artifacts.root) / "seeds/0123456789abcdef01234567.manifest.json.feed.partial").is_file()
    assert report.seeds == [] and report.blobs == 0  # the live run's world is untouched
