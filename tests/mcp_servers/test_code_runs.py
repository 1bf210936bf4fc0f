"""Per-run sandbox resources: uid leases that hold across processes and die with them, the
state folder and range checks, one queue per world, and the run's cgroup parenting its calls'."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_servers import create_server
from mcp_servers.code.uids import UidPoolError, lease_uid, parse_range
from tests.mcp_servers.helpers import make_world

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="uid leases are a root server's")
FIRST = 1_000_200_000  # a range of the tests' own, apart from the default one


@pytest.fixture
def state_dir(tmp_path: Path) -> str:
    return str(tmp_path / "uids")


def test_leases_are_exclusive_within_a_process_and_given_back(state_dir):
    uids = f"{FIRST}-{FIRST + 1}"
    first, second = lease_uid(uids, state_dir), lease_uid(uids, state_dir)
    assert {first.uid, second.uid} == {FIRST, FIRST + 1} and first.gid == first.uid
    with pytest.raises(UidPoolError, match="every uid of ATOLL_CODE_SANDBOX_UIDS"):
        lease_uid(uids, state_dir)
    first.release()
    assert lease_uid(uids, state_dir).uid == first.uid


def test_a_lease_held_by_another_process_is_skipped_and_freed_when_it_dies(state_dir):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from mcp_servers.code.uids import lease_uid; "
         f"lease = lease_uid('{FIRST}-{FIRST + 1}', {state_dir!r}); print(lease.uid, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    try:
        held = int(holder.stdout.readline())
        mine = lease_uid(f"{FIRST}-{FIRST + 1}", state_dir)
        assert mine.uid != held
        with pytest.raises(UidPoolError):
            lease_uid(f"{FIRST}-{FIRST + 1}", state_dir)
    finally:
        holder.kill()
        holder.wait()
    assert lease_uid(f"{FIRST}-{FIRST + 1}", state_dir).uid == held  # the kernel dropped its lock


def test_a_uid_with_an_account_is_never_leased(state_dir):
    taken = {entry.pw_uid for entry in pwd.getpwall()}
    account = min(uid for uid in taken if uid > 0 and uid + 1 not in taken)  # e.g. daemon (1)
    assert lease_uid(f"{account}-{account + 1}", state_dir).uid == account + 1


def test_the_state_folder_must_be_the_servers_alone(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UidPoolError, match="writable by it alone"):
        lease_uid(f"{FIRST}-{FIRST}", str(shared))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with pytest.raises(UidPoolError, match="cannot be opened"):
        lease_uid(f"{FIRST}-{FIRST}", str(link))


@pytest.mark.parametrize("text", ["", "5", "0-10", "10-5", "a-b", "1-4294967295"])
def test_a_bad_range_is_named(text):
    with pytest.raises(UidPoolError, match="ATOLL_CODE_SANDBOX_UIDS"):
        parse_range(text)


@as_root
def test_a_bad_range_setting_makes_code_exec_refuse_naming_it(tmp_path):
    from tests.mcp_servers.helpers import open_session

    world = make_world(tmp_path)
    with open_session("code", world, options={"sandbox_uids": "10-5"}) as session:
        error = session.error("code_exec", {"code": "true"})
    assert "ATOLL_CODE_SANDBOX_UIDS" in error["message"]


def test_one_worlds_queue_does_not_hold_another_worlds_calls(tmp_path):
    options = {"timeout_s": 30, "max_concurrent": 2, "max_processes": 64, "memory_mb": 1024}
    busy, idle = make_world(tmp_path / "busy"), make_world(tmp_path / "idle")

    async def scenario() -> float:
        busy_server = create_server(
            "code", fs_root=busy.fs_root, apps_data_root=busy.apps_root, options=options
        )
        idle_server = create_server(
            "code", fs_root=idle.fs_root, apps_data_root=idle.apps_root, options=options
        )
        async with Client(busy_server) as one, Client(idle_server) as other:
            sleepers = [
                asyncio.create_task(one.call_tool("code_exec", {"code": "sleep 6"})) for _ in range(6)
            ]
            await asyncio.sleep(1.0)
            started = time.monotonic()
            reply = await other.call_tool("code_exec", {"code": "echo here"})
            waited = time.monotonic() - started
            assert reply.structured_content["output"] == "here\n"
            await asyncio.gather(*sleepers)
            return waited

    assert asyncio.run(scenario()) < 4  # not behind the busy world's 6 × 6 s queue


@as_root
def test_a_process_serving_many_worlds_keeps_a_bounded_number_of_runs(tmp_path, state_dir):
    from mcp_servers.code import runs
    from mcp_servers.code.cgroup import CgroupLimits
    from mcp_servers.code.identity import UidRange

    plan = UidRange(f"{FIRST}-{FIRST + 99}", state_dir)
    limits = CgroupLimits(64 << 20, 16, 50)
    groups = []
    for index in range(runs._KEPT + 8):
        world = tmp_path / f"w{index}"
        world.mkdir()
        with runs.run_for(world, plan, limits) as run:
            assert run.identity is not None and run.identity.per_run
            groups += run.group.groups if run.group is not None else []
    kept = [run for (root, key), run in runs._RUNS.items() if key == plan]
    assert len(kept) <= runs._KEPT
    assert len({run.identity.uid for run in kept}) == len(kept)  # each its own uid
    kept_groups = {group for run in kept if run.group is not None for group in run.group.groups}
    assert not [group for group in groups if group not in kept_groups and group.exists()]  # removed
    runs.close_idle_runs()
    assert not any(group.exists() for group in groups)


@as_root
def test_run_groups_of_a_killed_server_are_swept():
    from mcp_servers.code.cgroup import remove_stale_run_groups

    root = Path(__file__).resolve().parents[2]
    killed = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from mcp_servers.code.cgroup import CgroupLimits, RunCgroup\n"
         "group = RunCgroup.create_parent(CgroupLimits(64 << 20, 16, 50))\n"
         "print(' '.join(str(g) for g in group.groups) if group else '', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    groups = [Path(name) for name in killed.stdout.readline().split()]
    killed.kill()
    killed.wait()
    assert groups and all(group.is_dir() for group in groups)  # SIGKILL: nobody removed them
    assert remove_stale_run_groups() >= 1
    assert not any(group.exists() for group in groups)


def test_entries_count_against_the_world_cap_and_the_overshoot_is_taken_back(tmp_path):
    from tests.mcp_servers.helpers import open_session

    world = make_world(tmp_path)
    for index in range(50):  # the world's own entries stay whatever the run does
        (world.fs_root / f"kept{index}.txt").write_text("kept")
    options = {"timeout_s": 60, "max_world_entries": 600, "max_processes": 64, "memory_mb": 1024}
    make_many = "for d in $(seq 1 40); do mkdir -p d$d; for f in $(seq 1 50); do : > d$d/f$f; ln -s x d$d/l$f; done; done"
    with open_session("code", world, options=options) as session:
        result = session.ok("code_exec", {"code": make_many})
        assert result["killed_reason"] and "600 entries" in result["killed_reason"], result
        assert sum(1 for _ in world.fs_root.rglob("*")) <= 600
        assert all((world.fs_root / f"kept{index}.txt").exists() for index in range(50))
        again = session.ok(
            "code_exec", {"code": "mkdir more && for f in $(seq 1 2000); do : > more/$f; done"}
        )
        assert again["killed_reason"], again
        assert sum(1 for _ in world.fs_root.rglob("*")) <= 600
        assert session.ok("code_exec", {"code": "echo still-runs"})["output"] == "still-runs\n"
