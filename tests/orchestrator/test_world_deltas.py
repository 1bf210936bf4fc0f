"""A trial's final state is a delta on its seed, taken from a real environment over HTTP: it
holds only what the agent wrote, the grader reads only what changed, and a world no manifest
can list falls back to the full snapshot."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest

from atoll.world_deltas import Delta
from grader.diff import diff_snapshots
from grader.snapshot import ManifestSnapshot, Snapshot
from orchestrator.executors import steps
from orchestrator.executors.seeds import SeedCache
from tests.atoll import apex_replica as replica

CONTRACT = "filesystem/Contracts/supply_agreement.txt"


@pytest.fixture
def environment(tmp_path: Path):
    from environment import EnvironmentServer, EnvironmentSettings

    root = Path(tempfile.mkdtemp(dir=tmp_path))
    settings = EnvironmentSettings(
        fs_root=root / "filesystem", apps_data_root=root / ".apps_data", json_logs=False, log_level="WARNING"
    )
    settings.fs_root.mkdir()
    settings.apps_data_root.mkdir()
    server = EnvironmentServer(settings).start()
    try:
        yield server
    finally:
        server.stop()


async def _populated(http: httpx.AsyncClient, environment, trial, seed):
    return await steps.prepare_world(
        http,
        steps.EnvironmentEndpoint(environment.url),
        seed_digest=seed.digest,
        world_id=trial.world_id,
        world_options={},
        seed_folder=seed.folder,
    )


async def _seed(tmp_path: Path):
    benchmark, trial = replica.file_task_trial(replica.write_v11_directory(tmp_path / "v11"), "deltas")
    return trial, await SeedCache(tmp_path / "seeds").get(trial, benchmark)


async def test_the_final_state_holds_only_what_the_agent_wrote(tmp_path: Path, environment) -> None:
    trial, seed = await _seed(tmp_path)
    endpoint = steps.EnvironmentEndpoint(environment.url)
    fs_root = environment.settings.fs_root
    async with httpx.AsyncClient(timeout=120) as http:
        populated = await _populated(http, environment, trial, seed)
        assert populated == seed.manifest.model_copy(update={"blobs": None})
        (fs_root / "Contracts" / "supply_agreement.txt").write_text("9.2 amended by the agent")
        (fs_root / "memo.txt").write_text("a new memo")
        out = tmp_path / "attempt"
        out.mkdir()
        base = steps.delta_base("exp/task/agent/run-1/attempt-1", seed.key)
        after = await steps.take_final_state(http, endpoint, out, base=base, base_digest=seed.digest)

    assert after.name == "after.delta.tar.gz"
    delta = Delta(after)
    assert delta.manifest.base == base == "../../../../../seeds/" + f"{seed.key}.manifest.json"
    assert delta.manifest.base_digest == seed.digest
    assert sorted(delta.read_blobs(delta.blob_sizes).values()) == [b"9.2 amended by the agent", b"a new memo"]
    # The grader sees exactly the two changes, reading nothing else.
    read: list[set[str]] = []

    def counted(paths: set[str]) -> dict[str, bytes]:
        read.append(set(paths))
        return steps.folder_reader(seed.folder)(paths)

    before, final = steps.trial_snapshots(populated, counted, after)
    assert isinstance(final, ManifestSnapshot)
    changes = {change.path: change.change for change in diff_snapshots(before, final).changes.files}
    assert changes == {CONTRACT: "modified", "filesystem/memo.txt": "created"}
    assert set().union(*read) == {CONTRACT}  # the old contract, for the judge's diff; nothing more


async def test_a_world_no_manifest_can_list_falls_back_to_the_full_snapshot(
    tmp_path: Path, environment
) -> None:
    trial, seed = await _seed(tmp_path)
    endpoint = steps.EnvironmentEndpoint(environment.url)
    async with httpx.AsyncClient(timeout=120) as http:
        populated = await _populated(http, environment, trial, seed)
        (environment.settings.fs_root / "odd\\name.txt").write_text("a name with a backslash")
        out = tmp_path / "attempt"
        out.mkdir()
        after = await steps.take_final_state(
            http, endpoint, out, base=steps.delta_base("exp/a", seed.key), base_digest=seed.digest
        )
        full = await steps.take_snapshot(http, endpoint)

    assert after.name == "after.tar.gz" and after.read_bytes() == full
    before, final = steps.trial_snapshots(populated, steps.folder_reader(seed.folder), after)
    assert isinstance(final, Snapshot)
    changes = diff_snapshots(before, final).changes.files
    assert [change.change for change in changes] == ["created"]


async def test_a_delta_on_another_base_is_refused(tmp_path: Path, environment) -> None:
    trial, seed = await _seed(tmp_path)
    endpoint = steps.EnvironmentEndpoint(environment.url)
    async with httpx.AsyncClient(timeout=120) as http:
        await _populated(http, environment, trial, seed)
        with pytest.raises(steps.InfraError, match="base_mismatch|409"):
            await steps.take_final_state(
                http, endpoint, tmp_path, base=steps.delta_base("exp/a", seed.key), base_digest="0" * 64
            )


async def test_a_populated_world_that_is_not_the_seed_is_an_infrastructure_error(
    tmp_path: Path, environment
) -> None:
    trial, seed = await _seed(tmp_path)
    (seed.folder / "filesystem" / "stray.txt").write_text(
        "left by someone"
    )  # the folder is no longer the seed
    async with httpx.AsyncClient(timeout=120) as http:
        with pytest.raises(steps.InfraError, match=f"is not fresh: .* differs from seed {seed.digest[:12]}"):
            await _populated(http, environment, trial, seed)
