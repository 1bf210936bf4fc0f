"""Deleting a run (orchestrator.run_deletion, `atoll delete`): exactly its rows and its attempt
folders go, never another run's (even one sharing its seed) nor anything outside the artifact
store; refused while its trials may run; a worker's late result does not bring it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult
from atoll_cli.cli import app
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.seeds import seed_key
from orchestrator.lifecycle import cancel_run
from orchestrator.lifecycle_models import InFlight
from orchestrator.run_deletion import delete_run
from orchestrator.store import TrialStore
from orchestrator.store_schema import (
    archived_trials,
    attempts,
    experiments,
    run_events,
    submissions,
    trials,
    webhook_cursors,
    webhook_deliveries,
    webhooks,
)
from tests.orchestrator.stored_worlds import age_everything, blob_key, run_trials, spec_for

SHARED = {"a.txt": b"shared world file", "b.txt": b"another shared file"}
ONLY_OLD = {"a.txt": b"shared world file", "c.txt": b"only the deleted run's world has this"}


def _rows(store: TrialStore, run: str) -> dict[str, int]:
    counted = {}
    with store.engine.connect() as connection:
        for table in (trials, archived_trials, attempts, run_events, webhook_deliveries, webhooks):
            counted[table.name] = connection.execute(
                select(func.count()).select_from(table).where(table.c.experiment == run)
            ).scalar_one()
        counted["experiments"] = connection.execute(
            select(func.count()).select_from(experiments).where(experiments.c.name == run)
        ).scalar_one()
        targets = connection.execute(select(webhook_cursors.c.target)).scalars().all()
        counted["webhook_cursors"] = sum(target.startswith(f"{run} ") for target in targets)
        replies = connection.execute(select(submissions.c.reply_json)).scalars().all()
        counted["submissions"] = sum(json.loads(reply or "{}").get("name") == run for reply in replies)
    return counted


def _two_runs(store: TrialStore, artifacts: ArtifactStore):
    """``old`` (worlds w1 and w2) and ``kept`` (w1: the same seed as old's w1 trials)."""
    old = run_trials(
        store,
        artifacts,
        "old",
        [spec_for("old", "t1", "w1"), spec_for("old", "t2", "w2"), spec_for("old", "t1", "w1", 1)],
        {"w1": SHARED, "w2": ONLY_OLD},
    )
    kept = run_trials(
        store,
        artifacts,
        "kept",
        [spec_for("kept", "t1", "w1"), spec_for("kept", "t1", "w1", 1)],
        {"w1": SHARED},
    )
    # Everything that names a run: an archived trial, events, a webhook with a cursor and a
    # delivery, an idempotency key whose reply was the run.
    for run in ("old", "kept"):
        archived_id = run_specs_first_id(store, run)
        store.archive_trials(run, keep=store.trial_ids(run) - {archived_id}, archive="a1", fingerprint=None)
        store.add_webhook(run, f"https://hooks.example/{run}")
        store.set_webhook_cursor(f"{run} https://hooks.example/{run}", 1)
        store.record_delivery(store.events(run)[0], f"https://hooks.example/{run}", 1, 200, None)
        holder, _ = store.reserve_submission(f"key-{run}", "digest")
        store.record_submission(f"key-{run}", holder, json.dumps({"name": run, "planned": 1}))
    return old, kept


def run_specs_first_id(store: TrialStore, run: str) -> str:
    return sorted(store.trial_ids(run))[0]


def test_delete_removes_exactly_the_runs_rows_and_folders_and_nothing_of_a_run_sharing_its_seed(
    store, tmp_path
):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    old, kept = _two_runs(store, artifacts)
    kept_rows = _rows(store, "kept")
    assert all(count for table, count in _rows(store, "old").items()), _rows(store, "old")
    root = Path(artifacts.root)

    deletion = delete_run(store, "old", artifacts=artifacts, gc=False)

    assert _rows(store, "old") == dict.fromkeys(kept_rows, 0)
    assert _rows(store, "kept") == kept_rows
    assert deletion.rows["trials"] == 2 and deletion.rows["archived_trials"] == 1
    assert deletion.rows["experiments"] == 1 and deletion.rows["attempts"] == 3
    assert sorted(deletion.folders) == sorted(artifacts.uri(folder) for folder in old.folders)
    assert deletion.folder_bytes > 0 and deletion.left == [] and deletion.problems == []
    assert not (root / "old").exists()  # empty parents went too
    assert all((root / folder / "after.delta.tar.gz").is_file() for folder in kept.folders)
    # The seeds are the collector's: the shared one and old's own are both still here.
    assert (root / f"seeds/{seed_key(spec_for('x', 't', 'w2'))}.manifest.json").is_file()
    assert store.run_record("kept") is not None and store.counts("kept")["done"] == 1
    with pytest.raises(AtollError) as again:
        delete_run(store, "old", artifacts=artifacts)
    assert again.value.code == "unknown_run"


def test_delete_collects_the_deleted_runs_unshared_blobs_and_keeps_the_shared_ones(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _two_runs(store, artifacts)
    age_everything(artifacts.root)
    root = Path(artifacts.root)
    old_seed = root / f"seeds/{seed_key(spec_for('x', 't', 'w2'))}.manifest.json"
    shared_seed = root / f"seeds/{seed_key(spec_for('x', 't', 'w1'))}.manifest.json"

    deletion = delete_run(store, "old", artifacts=artifacts)

    assert deletion.gc is not None and deletion.gc.problems == []
    assert [item.key for item in deletion.gc.seeds] == [f"seeds/{old_seed.name}"]
    assert not old_seed.exists() and shared_seed.is_file()
    assert not (root / blob_key(ONLY_OLD["c.txt"])).exists()  # only the deleted run's world had it
    assert deletion.gc.blobs == 1 and deletion.gc.blob_bytes > 0
    for data in SHARED.values():  # the live run's seed names them (a.txt was in old's w2 too)
        assert (root / blob_key(data)).is_file()


def test_a_result_uri_outside_the_artifact_store_or_the_runs_folder_is_left_and_reported(store, tmp_path):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    _old, kept = _two_runs(store, artifacts)
    outside = tmp_path / "outside" / "attempt-1"
    outside.mkdir(parents=True)
    (outside / "trajectory.json").write_text("{}")
    climbing = f"{artifacts.uri('old')}/../../outside/attempt-1/grade.json"
    (outside / "grade.json").write_text("{}")
    foreign = artifacts.uri(f"{kept.folders[0]}/after.delta.tar.gz")
    seed = artifacts.uri(f"seeds/{seed_key(spec_for('x', 't', 'w1'))}.manifest.json")
    (lease,) = _crafted_trial(store, "old")
    crafted = TrialResult(
        trial_id=lease.trial_id,
        outcome=Outcome.passed,
        trajectory_uri=outside.joinpath("trajectory.json").as_uri(),
        grade_uri=climbing,
        snapshot_after_uri=foreign,
        snapshot_before_uri=seed,
    )
    assert store.complete(lease, "w", crafted)

    deletion = delete_run(store, "old", artifacts=artifacts, gc=False)

    assert (outside / "trajectory.json").is_file() and (outside / "grade.json").is_file()
    assert (Path(artifacts.root) / kept.folders[0] / "after.delta.tar.gz").is_file()
    assert Path(artifacts.root, "seeds", f"{seed_key(spec_for('x', 't', 'w1'))}.manifest.json").is_file()
    left = "\n".join(deletion.left)
    assert outside.joinpath("trajectory.json").as_uri() in left and climbing in left and foreign in left
    assert len(deletion.left) == 3


def _crafted_trial(store: TrialStore, run: str):
    spec = spec_for(run, "crafted", "w1", 7)
    store.enqueue([spec])
    return store.lease("w", limit=1, lease_s=60, experiment=run)


def test_delete_is_refused_while_trials_are_leased_and_a_late_result_does_not_bring_the_run_back(
    store, tmp_path
):
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    run_trials(store, artifacts, "old", [spec_for("old", "t1", "w1")], {"w1": SHARED})
    (lease,) = _crafted_trial(store, "old")
    before = _rows(store, "old")

    with pytest.raises(AtollError) as refused:
        delete_run(store, "old", artifacts=artifacts)
    assert refused.value.code == "run_not_active" and "running" in refused.value.message
    assert _rows(store, "old") == before  # nothing removed
    # The store checks too, in the transaction that deletes (a resume racing the check above).
    with pytest.raises(AtollError) as in_store:
        store.delete_run_rows("old")
    assert in_store.value.code == "run_not_active" and "1 trials leased" in in_store.value.message

    cancel_run(store, "old", InFlight.stop)  # the lease is taken back; its worker still runs
    delete_run(store, "old", artifacts=artifacts)
    late = TrialResult(trial_id=lease.trial_id, outcome=Outcome.passed, agent_cost_usd=1.0)
    assert store.complete(lease, "w", late) is False
    assert store.fail_infra(lease, "w", "late failure", max_attempts=1) == "infra_error"
    store.record_stop("old", "interrupted", "a runner stopping late")
    assert _rows(store, "old") == dict.fromkeys(before, 0)
    assert "old" not in store.experiments() and store.spent_usd("old") == 0


def test_atoll_delete_asks_first_and_says_what_it_removed(tmp_path):
    url = f"sqlite:///{tmp_path / 'atoll.db'}"
    store = TrialStore(url)
    artifacts = ArtifactStore(str(tmp_path / "artifacts"))
    try:
        run_trials(store, artifacts, "old", [spec_for("old", "t1", "w1")], {"w1": SHARED})
    finally:
        store.dispose()
    runner = CliRunner()
    declined = runner.invoke(app, ["delete", "old", "--store", url], input="n\n")
    assert declined.exit_code != 0 and "old" in TrialStore(url).experiments()

    done = runner.invoke(app, ["delete", "old", "--store", url, "--yes", "--json", "--grace-hours", "0"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["rows"]["trials"] == 1 and len(report["folders"]) == 1
    assert report["gc"]["seeds"] and report["gc"]["blobs"] == 2  # grace 0: the run's world goes
    assert not [path for path in Path(artifacts.root, "blobs").rglob("*") if path.is_file()]
    unknown = runner.invoke(app, ["delete", "old", "--store", url, "--yes"])
    assert unknown.exit_code != 0 and "no run 'old'" in str(unknown.exception or unknown.output)
