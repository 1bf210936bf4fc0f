"""A run's artifacts URL is recorded absolute when it is submitted, so `atoll view` started in
another folder still finds a running trial's trajectory so far; a run recorded before that,
with the relative default, is read relative to where it was submitted (the folder its SQLite
store sits in), else to the viewer's folder."""

import asyncio
from datetime import UTC, datetime

from fastapi.testclient import TestClient

from atoll.experiment import ExperimentSpec
from atoll.trajectory import RunStatus, Trajectory
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors.evidence import TRAJECTORY_NAME
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app
from tests.atoll.factories import make_task, write_benchmark


def _running_with_steps(store: TrialStore, artifacts: ArtifactStore) -> str:
    """Lease the run's one trial and write its trajectory so far (2 steps); its id."""
    lease = store.lease("w", limit=1, lease_s=600)[0]
    folder = claim_trial_folder(artifacts, lease.spec, lease.attempt)
    messages = [{"role": "user", "content": "Summarise the engagement letter."}]
    for step in (1, 2):
        messages.append({"role": "assistant", "content": f"step {step} so far"})
    now = datetime.now(UTC)
    so_far = Trajectory(
        agent="replay",
        model="replay",
        status=RunStatus.running,
        messages=messages,
        steps=2,
        started_at=now,
        ended_at=now,
    )
    artifacts.put_bytes(f"{folder}/{TRAJECTORY_NAME}", so_far.model_dump_json().encode())
    return lease.trial_id


def test_a_viewer_started_elsewhere_finds_a_running_trials_steps(tmp_path, monkeypatch):
    submitted_from, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    submitted_from.mkdir()
    elsewhere.mkdir()
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t1")])
    monkeypatch.chdir(submitted_from)
    spec = ExperimentSpec.model_validate(
        {
            "name": "live",
            "benchmark": str(benchmark),
            "agents": [{"name": "alpha", "agent": "replay", "model": "replay"}],
            "executor": "instant",
            "store": "atoll-out/atoll.db",  # the defaults, relative to where it is submitted
            "artifacts": "file://atoll-out/artifacts",
            "output_dir": "atoll-out",
        }
    )
    asyncio.run(run_experiment(spec, quiet=True, enqueue_only=True))
    store = TrialStore(str(submitted_from / "atoll-out" / "atoll.db"))
    recorded = store.experiment_spec("live")["artifacts"]
    assert recorded == (submitted_from / "atoll-out" / "artifacts").as_uri()
    trial_id = _running_with_steps(store, ArtifactStore(recorded))

    monkeypatch.chdir(elsewhere)
    with TestClient(create_app(store)) as client:
        detail = client.get(f"/api/trials/{trial_id}", params={"run": "live"}).json()
    assert detail["running"]["artifacts"] == recorded
    assert [s["text"] for s in detail["transcript"]["steps"]] == ["step 1 so far", "step 2 so far"]

    # A run recorded relative (before runs recorded it absolute): read relative to the folder
    # holding its store's atoll-out, not the viewer's.
    store.save_experiment(
        "live", {**store.experiment_spec("live"), "artifacts": "file://atoll-out/artifacts"}
    )
    with TestClient(create_app(store)) as client:
        detail = client.get(f"/api/trials/{trial_id}", params={"run": "live"}).json()
    assert detail["running"]["artifacts"] == recorded
    assert len(detail["transcript"]["steps"]) == 2
    store.dispose()
