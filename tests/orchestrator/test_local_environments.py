"""The local executor's in-process environments (orchestrator.executors.local._EnvironmentPool):
while they run, their world work takes turns (atoll.runtime's world lane); when the pool
closes, the lane and its worlds go; and the worlds of a run that was killed go when the next
run starts (orchestrator.executors.scratch_pools)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from atoll import runtime
from orchestrator.executors.local import _EnvironmentPool
from orchestrator.executors.scratch_pools import sweep_abandoned

ROOT = Path(__file__).resolve().parents[2]


def test_environments_sharing_the_process_share_the_lane_while_they_run(tmp_path, monkeypatch):
    # Off to begin with, whatever an earlier test in this process left sharing it.
    monkeypatch.setattr(runtime, "_world_lane_users", 0)

    async def scenario() -> None:
        pool = _EnvironmentPool(2, tmp_path)
        try:
            assert not runtime.world_lane_shared()
            environment = await pool.acquire()
            assert runtime.world_lane_shared()
            pool.release(environment, healthy=True)
        finally:
            pool.close()
        assert not runtime.world_lane_shared()
        assert list(tmp_path.iterdir()) == []  # its worlds, parked ones included

    asyncio.run(scenario())


# --- world folders a killed process left ----------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from orchestrator.executors.scratch_pools import PoolFolder
folder = PoolFolder(Path(sys.argv[1]))
(folder.path / "env-1" / "filesystem").mkdir(parents=True)
(folder.path / "env-1" / "filesystem" / "big.bin").write_bytes(b"x" * 4096)
print(folder.path, flush=True)
time.sleep(120)
"""


def _holder(scratch: Path) -> tuple[subprocess.Popen, Path]:
    """A process that holds a world folder in ``scratch`` until it is killed."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(scratch)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    line = process.stdout.readline().strip()
    assert line, "the holder did not start"
    return process, Path(line)


def test_a_killed_runs_worlds_are_removed_when_the_next_run_starts(tmp_path):
    process, left = _holder(tmp_path)
    process.kill()  # SIGKILL: nothing of the process's own clean-up runs
    process.wait()
    assert (left / "env-1" / "filesystem" / "big.bin").exists()

    async def next_run() -> None:
        pool = _EnvironmentPool(1, tmp_path)
        try:
            await pool.acquire()
            assert not left.exists()
            assert len(list(tmp_path.glob("atoll-pool-*"))) == 1  # its own
        finally:
            pool.close()
        assert list(tmp_path.iterdir()) == []

    asyncio.run(next_run())


def test_a_running_processs_worlds_are_left_alone(tmp_path):
    process, held = _holder(tmp_path)
    try:
        assert sweep_abandoned(tmp_path) == 0
        assert (held / "env-1" / "filesystem" / "big.bin").exists()
    finally:
        process.kill()
        process.wait()
    assert sweep_abandoned(tmp_path) == 1
    assert not held.exists()


def test_the_sweep_removes_only_folders_of_its_own_kind(tmp_path):
    """Files, other folders, an ``atoll-pool-`` symlink (to a folder elsewhere) and an unlocked
    ``atoll-pool-`` folder without atoll's mark (someone else's, in a shared /tmp) are not
    touched."""
    scratch, elsewhere = tmp_path / "scratch", tmp_path / "elsewhere"
    scratch.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (scratch / "atoll-pool-link").symlink_to(elsewhere)
    (scratch / "atoll-pool-notes.txt").write_text("notes")
    (scratch / "atoll-pool-theirs").mkdir()
    (scratch / "atoll-pool-theirs" / "data.txt").write_text("theirs")
    (scratch / "seeds").mkdir()
    assert sweep_abandoned(scratch) == 0
    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert (scratch / "atoll-pool-theirs" / "data.txt").read_text() == "theirs"
    assert sorted(p.name for p in scratch.iterdir()) == [
        "atoll-pool-link",
        "atoll-pool-notes.txt",
        "atoll-pool-theirs",
        "seeds",
    ]
