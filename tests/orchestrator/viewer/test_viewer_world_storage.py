"""The viewer over trials stored as a seed manifest and a delta: downloads are the very archives
the environment's ``/data/snapshot`` gave, single files and the world diff are read in place,
and trials stored before (full ``after.tar.gz``) read as they did."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from atoll.world_store import seed_manifest_key
from environment import EnvironmentServer
from orchestrator.store import TrialStore
from tests.atoll.world_factories import delta_bytes, store_seed
from tests.environment.factories import make_test_server, world_settings
from tests.orchestrator.viewer.conftest import serve

RUN = "stored"
DELTA_KEY = f"{RUN}/t-delta/agent/run-0/attempt-1/after.delta.tar.gz"


@dataclass
class StoredRun:
    url: str
    before: bytes  # what the environment's /data/snapshot gave before the agent ran
    after: bytes  # and after
    artifacts: Path


def _spec(task_id: str) -> TrialSpec:
    return TrialSpec(
        experiment=RUN,
        task_id=task_id,
        world_id="w",
        world_digest="d",
        agent_name="agent",
        agent="replay",
        model="m",
        run_index=0,
    )


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("stored-run")
    world = tmp / "world"
    (world / "filesystem" / "Reports").mkdir(parents=True)
    (world / ".apps_data" / "mail").mkdir(parents=True)
    (world / "filesystem" / "Reports" / "summary.txt").write_text("Profit: 10\n")
    (world / "filesystem" / "Reports" / "old.txt").write_text("to be deleted\n")
    (world / "filesystem" / "data.bin").write_bytes(os.urandom(200_000))
    (world / ".apps_data" / "mail" / "inbox.mbox").write_text("From a@x\n\nhello\n")
    with (
        EnvironmentServer(world_settings(world), server_factory=make_test_server) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        before = http.post("/data/snapshot").raise_for_status().content
        # What an agent does: edit, create (an executable too), delete.
        (world / "filesystem" / "Reports" / "summary.txt").write_text("Profit: 40\n")
        (world / "filesystem" / "Reports" / "memo.md").write_text("Done.\n")
        (world / "filesystem" / "run.sh").write_text("#!/bin/sh\n")
        (world / "filesystem" / "run.sh").chmod(0o755)
        (world / "filesystem" / "Reports" / "old.txt").unlink()
        after = http.post("/data/snapshot").raise_for_status().content

    artifacts = tmp / "artifacts"
    artifacts.mkdir()
    seed_uri, base = store_seed(artifacts, "w", before)
    delta = artifacts / DELTA_KEY
    delta.parent.mkdir(parents=True)
    delta.write_bytes(delta_bytes(after, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w")))
    legacy = artifacts / RUN / "t-legacy" / "agent" / "run-0" / "attempt-1" / "after.tar.gz"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(after)
    (artifacts / "seeds" / "w.tar.gz").write_bytes(before)

    store = TrialStore(str(tmp / "atoll.db"))
    store.save_experiment(RUN, {"name": RUN, "benchmark": "b", "agents": [{"name": "agent"}]})
    store.enqueue([_spec("t-delta"), _spec("t-legacy")])
    uris = {
        "t-delta": (seed_uri, delta.as_uri()),
        "t-legacy": ((artifacts / "seeds" / "w.tar.gz").as_uri(), legacy.as_uri()),
    }
    for lease in store.lease("w", limit=2, lease_s=60):
        task_id = next(
            s.task_id for s in (_spec("t-delta"), _spec("t-legacy")) if s.trial_id == lease.trial_id
        )
        before_uri, after_uri = uris[task_id]
        result = TrialResult(
            trial_id=lease.trial_id,
            outcome=Outcome.passed,
            snapshot_before_uri=before_uri,
            snapshot_after_uri=after_uri,
        )
        assert store.complete(lease, "w", result)
    with serve(store) as url:
        yield StoredRun(url=url, before=before, after=after, artifacts=artifacts)
    store.dispose()


@pytest.mark.parametrize("task_id", ["t-delta", "t-legacy"])
def test_downloads_are_the_archives_the_environment_gave(stored_run: StoredRun, task_id: str) -> None:
    trial_id = _spec(task_id).trial_id
    for what, expected in (("before", stored_run.before), ("after", stored_run.after)):
        response = httpx.get(f"{stored_run.url}/api/trials/{trial_id}/download/{what}", timeout=30)
        assert response.status_code == 200
        assert response.content == expected, f"{task_id} {what}"


@pytest.mark.parametrize("task_id", ["t-delta", "t-legacy"])
def test_files_and_the_world_diff_read_alike_from_either_layout(stored_run: StoredRun, task_id: str) -> None:
    trial_id = _spec(task_id).trial_id
    memo = httpx.get(
        f"{stored_run.url}/api/trials/{trial_id}/file/after", params={"path": "filesystem/Reports/memo.md"}
    )
    assert memo.status_code == 200 and memo.content == b"Done.\n"
    missing = httpx.get(
        f"{stored_run.url}/api/trials/{trial_id}/file/after", params={"path": "filesystem/Reports/old.txt"}
    )
    assert missing.status_code == 404
    detail = httpx.get(f"{stored_run.url}/api/trials/{trial_id}", timeout=30).json()
    changes = {f["path"]: f["change"] for f in detail["world_diff"]["files"]}
    assert changes == {
        "filesystem/Reports/summary.txt": "modified",
        "filesystem/Reports/memo.md": "created",
        "filesystem/run.sh": "created",
        "filesystem/Reports/old.txt": "deleted",
    }


def test_a_delta_escaping_its_store_is_refused_not_served(stored_run: StoredRun, tmp_path: Path) -> None:
    from orchestrator.viewer.worlddiff import SnapshotCache

    crafted = stored_run.artifacts / RUN / "crafted" / "after.delta.tar.gz"
    crafted.parent.mkdir(parents=True, exist_ok=True)
    _uri, base = store_seed(tmp_path, "w", stored_run.before)  # a seed outside the store
    crafted.write_bytes(
        delta_bytes(
            stored_run.after,
            base,
            delta_key=f"{RUN}/crafted/after.delta.tar.gz",
            base_key=seed_manifest_key("w"),
            base_ref=os.path.relpath(tmp_path / "seeds" / "w.manifest.json", crafted.parent),
        )
    )
    cache = SnapshotCache()
    try:
        with pytest.raises(AtollError) as refused:
            cache.local(crafted.as_uri())
        assert refused.value.code == "bad_world_reference" and "w.manifest.json" in refused.value.message
    finally:
        cache.close()
