"""A v1.1 world (one seed archive per subsystem) is planned and seeded like a v1 world zip."""

from __future__ import annotations

from orchestrator.executors.local import SeedCache
from tests.atoll import apex_replica as replica


async def test_per_subsystem_seeds_populate_the_trial_world(tmp_path):
    benchmark, trial = replica.file_task_trial(replica.write_v11_directory(tmp_path / "v11"), "v11")
    assert len(trial.world_digest) == 64 and trial.overlay_digest
    seed = await SeedCache(tmp_path / "seeds").get(trial, benchmark)
    folder, digest = seed.folder, seed.digest
    assert (folder / "filesystem" / "Contracts" / "supply_agreement.txt").read_bytes().startswith(b"9.2")
    assert (folder / ".apps_data" / "mail" / "inbox.mbox").is_file()
    assert (folder / "filesystem" / "Trackers" / "tariffs.xlsx").is_file()  # the task overlay
    assert len(digest) == 64
