"""A v1.1 world (one seed archive per subsystem) is planned and seeded like a v1 world zip."""

from __future__ import annotations

from atoll.experiment import ExperimentSpec
from atoll.loader import load_benchmark
from orchestrator.executors.local import SeedCache
from orchestrator.planner import plan_trials
from tests.atoll import apex_replica as replica


async def test_per_subsystem_seeds_populate_the_trial_world(tmp_path):
    benchmark = load_benchmark(replica.write_v11_directory(tmp_path / "v11"))
    spec = ExperimentSpec.model_validate(
        {
            "name": "v11",
            "benchmark": benchmark.root,
            "tasks": {"ids": [replica.FILE_TASK]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        }
    )
    (trial,) = plan_trials(benchmark, spec)
    assert len(trial.world_digest) == 64 and trial.overlay_digest
    seed = await SeedCache(tmp_path / "seeds").get(trial, benchmark)
    folder, digest = seed.folder, seed.digest
    assert (folder / "filesystem" / "Contracts" / "supply_agreement.txt").read_bytes().startswith(b"9.2")
    assert (folder / ".apps_data" / "mail" / "inbox.mbox").is_file()
    assert (folder / "filesystem" / "Trackers" / "tariffs.xlsx").is_file()  # the task overlay
    assert len(digest) == 64
