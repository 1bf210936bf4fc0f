"""One trial cannot starve another: two real environments (``atoll env serve`` processes, each
over its own world) side by side, running real bubblewrap sandboxes. One exhausts its process,
memory and disk limits; the other's ``code_exec`` keeps working. Run once with the cgroups this
host gives, and once with cgroupfs read-only, as Docker mounts it, where the run's own host
uid is what keeps the process counts apart."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastmcp import Client

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="per-run uids are a root server's (tests run as root)"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

ATOLL = str(Path(sys.executable).parent / "atoll")
REPOSITORY = Path(__file__).resolve().parents[2]
OPTIONS = {
    "timeout_s": 30,
    "max_processes": 48,
    "memory_mb": 512,
    "max_file_mb": 64,
    "max_write_mb": 24,
    "max_world_mb": 24,
    "max_concurrent": 8,
}
# As many processes as the sandbox lets it start, each held for a while; prints the count.
HOLD_PROCESSES = (
    'python3 -c "\nimport os, time\nstarted = 0\nfor _ in range(300):\n    try:\n'
    "        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n"
    "        time.sleep(7)\n        os._exit(0)\n    started += 1\nprint('held', started)\ntime.sleep(7)\n\""
)
HOLD_MEMORY = (
    "python3 -c \"b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); print('held'); "
    'import time; time.sleep(5)"'
)
# Ro-mounts every cgroup hierarchy in a private mount namespace, then serves: Docker's view.
READ_ONLY_CGROUPS = (
    "mount --make-rprivate / && "
    'for m in $(awk \'$3=="cgroup" || $3=="cgroup2" {print $2}\' /proc/self/mounts) /sys/fs/cgroup; '
    'do mount -o remount,bind,ro "$m"; done && exec "$@"'
)


@dataclass
class Trial:
    url: str
    fs_root: Path
    process: subprocess.Popen

    def call(self, code: str) -> dict:
        return asyncio.run(self.calls([code]))[0]

    async def calls(self, codes: list[str]) -> list[dict]:
        async with Client(f"{self.url}/mcp") as mcp:
            replies = await asyncio.gather(
                *(mcp.call_tool("code_code_exec", {"code": code}, raise_on_error=False) for code in codes)
            )
        return [reply.structured_content or {"output": str(reply.content)} for reply in replies]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(base: Path, read_only_cgroups: bool) -> Trial:
    port = _free_port()
    fs_root = base / "filesystem"
    command = [ATOLL, "env", "serve", "--port", str(port), "--fs-root", str(fs_root)]
    command += ["--apps-data-root", str(base / "apps")]
    if read_only_cgroups:
        command = ["unshare", "--mount", "sh", "-c", READ_ONLY_CGROUPS, "sh", *command]
    env = {**os.environ, "ATOLL_PRELOAD_SERVERS": "false", "ATOLL_LOG_LEVEL": "WARNING"}
    env = {name: value for name, value in env.items() if not name.startswith("ATOLL_CODE_")}
    env["PYTHONPATH"] = str(REPOSITORY)  # this checkout's code, whichever one the venv installed
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, "env serve did not start"
        time.sleep(0.2)
    apps = {"code": {"transport": "inprocess", "server": "code", "options": OPTIONS}}
    reply = httpx.post(f"{url}/apps", json={"mcpServers": apps}, timeout=60)
    assert reply.status_code == 200 and "code_code_exec" in reply.json()["tools"], reply.text
    return Trial(url, fs_root, process)


def _pair(tmp_path_factory: pytest.TempPathFactory, read_only_cgroups: bool) -> Iterator[tuple[Trial, Trial]]:
    trials = []
    try:
        for name in ("a", "b"):
            base = tmp_path_factory.mktemp(f"trial-{name}")
            os.chmod(base, 0o755)
            trials.append(_serve(base, read_only_cgroups))
        yield trials[0], trials[1]
    finally:
        for trial in trials:
            trial.process.terminate()
            trial.process.wait(timeout=30)


@pytest.fixture(scope="module")
def trials(tmp_path_factory) -> Iterator[tuple[Trial, Trial]]:
    yield from _pair(tmp_path_factory, read_only_cgroups=False)


@pytest.fixture(scope="module")
def docker_like_trials(tmp_path_factory) -> Iterator[tuple[Trial, Trial]]:
    yield from _pair(tmp_path_factory, read_only_cgroups=True)


def _held(results: list[dict]) -> int:
    # A bomb call that ended in a tool error (its time limit on a loaded machine) held nothing.
    return sum(
        int(line.split()[1])
        for r in results
        for line in r.get("output", "").splitlines()
        if line.startswith("held ")
    )


def _fork_bomb_beside(bomber: Trial, other: Trial) -> tuple[list[dict], list[dict]]:
    """Eight concurrent calls in ``bomber`` hold every process they can get; meanwhile
    ``other`` starts a sandbox and 20 processes of its own."""

    async def scenario() -> tuple[list[dict], list[dict]]:
        bombs = asyncio.create_task(bomber.calls([HOLD_PROCESSES] * 8))
        await asyncio.sleep(4)  # the bombs hold their processes now
        beside = await other.calls(["echo alive", HOLD_PROCESSES.replace("range(300)", "range(20)")])
        return await bombs, beside

    return asyncio.run(scenario())


def test_a_fork_bomb_in_one_trial_leaves_the_other_working(trials):
    a, b = trials
    bombs, beside = _fork_bomb_beside(a, b)
    assert beside[0]["exit_code"] == 0 and beside[0]["output"] == "alive\n", beside[0]
    assert "held 20" in beside[1]["output"], beside[1]
    # The run's limit holds for its eight calls together, not per call.
    assert 0 < _held(bombs) <= OPTIONS["max_processes"], [str(r)[-200:] for r in bombs]


def test_with_read_only_cgroups_the_runs_own_uid_keeps_process_counts_apart(docker_like_trials):
    a, b = docker_like_trials
    _, beside = _fork_bomb_beside(a, b)
    assert beside[0]["exit_code"] == 0 and beside[0]["output"] == "alive\n", beside[0]
    assert "held 20" in beside[1]["output"], beside[1]
    health = httpx.get(f"{a.url}/health").json()
    sandbox = health.get("code_sandbox") or health["checks"]["code_sandbox"]
    assert sandbox["cgroup"] == [] and "a host uid of its own" in sandbox["isolation"], sandbox


def test_each_trials_sandbox_runs_as_a_host_uid_of_its_own(trials):
    a, b = trials
    owners = []
    for trial in trials:
        assert trial.call("touch mine.txt")["exit_code"] == 0
        owners.append((trial.fs_root / "mine.txt").stat().st_uid)
    assert owners[0] != owners[1] and 0 not in owners
    # The uid stays the run's across calls.
    assert a.call("touch again.txt")["exit_code"] == 0
    assert (a.fs_root / "again.txt").stat().st_uid == owners[0]


def test_memory_counts_per_run_and_one_run_at_its_limit_leaves_the_other_free(trials):
    a, b = trials

    async def scenario() -> tuple[list[dict], list[dict]]:
        hogs = asyncio.create_task(a.calls([HOLD_MEMORY] * 2))  # 600 MB under a 512 MB run limit
        await asyncio.sleep(1.5)
        return await hogs, await b.calls([HOLD_MEMORY])

    hogs, beside = asyncio.run(scenario())
    # Both never hold at once: one is killed, even if it had printed "held" before the other
    # allocated (a busy machine starts them apart); with per-call limits both ended holding.
    assert sum(r["exit_code"] == 0 and "held" in r["output"] for r in hogs) <= 1, hogs
    assert beside[0]["output"].count("held") == 1, beside


def test_one_trial_at_its_disk_cap_leaves_the_other_writing(trials):
    a, b = trials
    filled = a.call("for i in $(seq 1 40); do head -c 1000000 /dev/urandom > fill_$i.bin || break; done")
    assert filled["killed_reason"], filled
    written = b.call("head -c 5000000 /dev/urandom > ok.bin && echo wrote")
    assert written["exit_code"] == 0 and "wrote" in written["output"], written
    for name in list(a.fs_root.glob("fill_*.bin")):
        name.unlink()


def test_sparse_files_made_through_code_exec_are_refused_by_the_snapshot_at_once(trials):
    a, _ = trials
    # Holes take no disk, so the disk cap lets them through; the snapshot's sparse cap does not.
    made = a.call("truncate -s 60M hole1.bin && truncate -s 60M hole2.bin && echo made")
    assert "made" in made["output"], made
    started = time.monotonic()
    reply = httpx.post(f"{a.url}/data/snapshot", timeout=120)
    assert reply.status_code == 413 and time.monotonic() - started < 5, reply.text
    assert "is sparse" in reply.json()["detail"]["error"]
    for name in ("hole1.bin", "hole2.bin"):
        (a.fs_root / name).unlink()
    assert httpx.post(f"{a.url}/data/snapshot", timeout=120).status_code == 200
