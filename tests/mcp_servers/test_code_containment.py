"""code_exec as an attacker uses it when the server runs as root: privileges, keyrings,
set-id bits, limits that hold for a whole run, and the masked-/proc sandbox mode."""

import asyncio
import ctypes
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio.to_thread
import pytest
from fastmcp import Client

from mcp_servers import create_server
from mcp_servers.code.config import CodeOptions
from mcp_servers.code.identity import UidRange, resolve_identity
from mcp_servers.code.uids import parse_range
from tests.mcp_servers.helpers import make_world, open_session

FAST = {"timeout_s": 30, "max_write_mb": 20, "max_file_mb": 10, "memory_mb": 1024, "max_processes": 64}
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="simulates what happens when the server runs as root")


@pytest.fixture
def world(tmp_path):
    return make_world(tmp_path)


@pytest.fixture
def code(world):
    with open_session("code", world, options=FAST) as session:
        yield session


def _run(session, command, **extra):
    return session.ok("code_exec", {"code": command, **extra})


def test_the_command_is_never_host_root(code, world):
    result = _run(code, "touch owned.txt; mkdir made; id -u")
    assert result["exit_code"] == 0, result["output"]
    for name in ("owned.txt", "made"):
        owner = (world.fs_root / name).stat()
        assert owner.st_uid != 0 and owner.st_gid != 0
    plan = resolve_identity(CodeOptions.resolve())
    if isinstance(plan, UidRange):  # a root server drops to a uid of the run's own
        first, last = parse_range(plan.uids)
        assert first <= (world.fs_root / "owned.txt").stat().st_uid <= last
    elif plan is not None:  # or to the configured user
        assert (world.fs_root / "owned.txt").stat().st_uid == plan.uid


@as_root
def test_files_the_server_made_stay_writable_for_the_sandbox(code, world):
    world.file("/from_tools.txt", "written by another tool, as root\n")
    os.chmod(world.fs_root / "from_tools.txt", 0o644)
    result = _run(code, "echo appended >> from_tools.txt && rm -f from_tools.txt.bak && cat from_tools.txt")
    assert result["exit_code"] == 0 and "appended" in result["output"]


def test_proc_sys_and_sysrq_cannot_be_written(code):
    before = Path("/proc/sys/vm/swappiness").read_text()
    pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    command = (
        "for target in /proc/sys/vm/swappiness /proc/sys/kernel/core_pattern /proc/sysrq-trigger; do "
        "(echo 7 > $target) 2>/dev/null && echo WROTE $target; done; echo checked"
    )
    result = _run(code, command)
    assert "WROTE" not in result["output"] and "checked" in result["output"]
    assert Path("/proc/sys/vm/swappiness").read_text() == before
    assert Path("/proc/sys/kernel/core_pattern").read_text() == pattern


# unshare(CLONE_NEWUSER) straight from libc: the syscall itself, not the unshare tool (which
# also fails without /proc/self, for another reason).
_NEW_USERNS = 'python3 -c \'import ctypes; print("NESTED-USERNS" if ctypes.CDLL(None).unshare(0x10000000) == 0 else "refused")\''


def test_no_user_namespace_of_its_own(code):
    command = f'{_NEW_USERNS}; python3 -c \'import subprocess; subprocess.run(["echo", "spawned"])\''
    output = _run(code, command)["output"]
    assert "refused" in output and "NESTED-USERNS" not in output
    assert "spawned" in output  # ordinary process creation (clone, clone3 fallback) still works


_KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(platform.machine())
_READ_KEY = textwrap.dedent("""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    add_key, request_key, keyctl = {numbers}
    key = libc.syscall(request_key, b"user", b"atoll-canary", None, 0)
    buffer = ctypes.create_string_buffer(256)
    size = libc.syscall(keyctl, 11, key, buffer, 256) if key > 0 else -1
    print("KEY", key, buffer.raw[:max(size, 0)].decode(errors="replace"))
""")


@pytest.mark.skipif(_KEYCTL is None, reason="keyctl syscall numbers known for x86_64 and aarch64 only")
def test_the_servers_keyring_is_out_of_reach(code, world):
    add_key, request_key, keyctl = _KEYCTL
    libc = ctypes.CDLL(None, use_errno=True)
    payload = b"KEYRING-CANARY"
    key = libc.syscall(add_key, b"user", b"atoll-canary", payload, len(payload), -3)  # session keyring
    assert key > 0, os.strerror(ctypes.get_errno())
    try:
        world.file("/read_key.py", _READ_KEY.format(numbers=_KEYCTL))
        mine = subprocess.run(
            [sys.executable, str(world.fs_root / "read_key.py")], capture_output=True, text=True
        )
        assert "KEYRING-CANARY" in mine.stdout  # the server itself can read it: the test can fail
        output = _run(code, "python3 read_key.py")["output"]
        assert "KEYRING-CANARY" not in output and "KEY -1" in output
    finally:
        libc.syscall(keyctl, 3, key)  # KEYCTL_REVOKE


def test_set_id_bits_are_stripped_before_the_call_returns(code, world):
    result = _run(code, "cp /bin/true suid; chmod 4755 suid; cp /bin/true sgid; chmod 2755 sgid; "
                        "mkdir shared; chmod 2775 shared; ls -l suid sgid")  # fmt: skip
    assert "rws" in result["output"] or "rwS" in result["output"]  # the chmod itself worked
    for name in ("suid", "sgid", "shared"):
        mode = (world.fs_root / name).stat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), f"{name}: {oct(mode)}"
    assert (world.fs_root / "suid").stat().st_mode & 0o755 == 0o755  # the rest of the mode stays
    assert any("set-uid/set-gid" in note for note in result["notes"])  # the agent is told


_HOLD = 'python3 -c \'import time; block = b"x" * (400 << 20); time.sleep(3); print("held")\''


def test_memory_is_limited_for_the_run_not_per_process(code):
    # Each process fits the 1024 MB limit on its own; the three together do not.
    output = _run(code, f"({_HOLD}) & ({_HOLD}) & ({_HOLD}) & wait; echo all-done")["output"]
    assert "all-done" in output
    assert output.splitlines().count("held") < 3


def _world_bytes(root):
    return sum(
        path.stat().st_blocks * 512 for path in root.rglob("*") if path.is_file() and not path.is_symlink()
    )


@pytest.fixture
def memory_world(tmp_path):
    """A world on tmpfs: creating 60,000 files on this machine's disk takes half a minute."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm")
    base = Path(tempfile.mkdtemp(prefix="atoll-test-", dir=shm))
    try:
        yield make_world(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_disk_cap_holds_with_many_entries_and_across_calls(memory_world):
    world = memory_world
    with open_session("code", world, options=FAST) as code:
        _cap_across_calls(code, world)


def _cap_across_calls(code, world):
    many = _run(
        code, "python3 -c \"[open(f'e{i}', 'w').close() for i in range(60000)]\"; echo made", timeout_s=120
    )
    assert "made" in many["output"] and many["killed_reason"] is None
    before = _world_bytes(world.fs_root)
    fill = _run(code, "mkdir -p deep/er; for i in $(seq 1 20); do head -c 5000000 /dev/zero > deep/er/f$i; done; "
                      "echo finished", timeout_s=120)  # fmt: skip
    # Killed on the way, or (tmpfs is fast) finished between two looks and trimmed afterwards.
    assert fill["killed_reason"] and "wrote more than 20 MB" in fill["killed_reason"]
    assert _world_bytes(world.fs_root) - before <= 21 * 1024 * 1024


def test_calls_cannot_add_up_past_the_world_cap(world):
    options = {**FAST, "max_world_mb": 30}
    with open_session("code", world, options=options) as session:
        first = session.ok(
            "code_exec", {"code": "head -c 8000000 /dev/zero > a; head -c 8000000 /dev/zero > b"}
        )
        second = session.ok(
            "code_exec", {"code": "head -c 8000000 /dev/zero > c; head -c 8000000 /dev/zero > d"}
        )
    assert first["killed_reason"] is None  # 16 MB: under both caps
    assert second["killed_reason"] == "the world's files passed 30 MB"  # 16 MB more: under 20, not 30
    assert _world_bytes(world.fs_root) <= 30 * 1024 * 1024


_DEEP = "python3 -c \"import os\nfor _ in range(600): os.mkdir('d'); os.chdir('d')\nopen('leaf', 'w').write('x')\""


def _depth(root):
    return max((len(Path(path).relative_to(root).parts) for path, _, _ in os.walk(root)), default=0)


def test_folders_nested_too_deep_are_removed_after_the_call(code, world):
    result = _run(code, _DEEP)
    assert "nested deeper than 400" in result["killed_reason"]
    assert _depth(world.fs_root) <= 400  # what a later walk, snapshot or call must go through
    assert not list(world.fs_root.glob(".atoll-deep-*"))
    assert _run(code, "echo next")["output"] == "next\n"


def test_sandbox_status_is_reported_for_health_endpoints():
    from mcp_servers.code import sandbox_report

    deadline = time.monotonic() + 60
    report = sandbox_report()
    while report["available"] is None and time.monotonic() < deadline:
        time.sleep(0.2)
        report = sandbox_report()
    assert report["available"] is True and report["mode"] in ("procfs", "minimal-proc")
    assert report["reason"] is None and report["user"]


def test_a_killed_writer_leaves_the_world_under_the_cap(world):
    options = {**FAST, "max_file_mb": 400}
    with open_session("code", world, options=options) as session:
        result = session.ok(
            "code_exec", {"code": "for i in 1 2 3 4; do head -c 300000000 /dev/zero > w$i; done"}
        )
    assert "wrote more than 20 MB" in result["killed_reason"]
    assert _world_bytes(world.fs_root) <= 21 * 1024 * 1024  # the overshoot was taken back
    assert any("newest files" in note for note in result["notes"])


def test_a_deleted_file_held_open_counts_against_the_cap(world):
    options = {**FAST, "max_file_mb": 400}
    command = "exec 3> hidden; rm hidden; head -c 200000000 /dev/zero >&3; sleep 10; echo survived"
    with open_session("code", world, options=options) as session:
        result = session.ok("code_exec", {"code": command})
    assert result["killed_reason"] and "wrote more than 20 MB" in result["killed_reason"]
    assert "survived" not in result["output"]


@pytest.mark.serial
def test_long_code_calls_do_not_starve_other_tools(world):
    world.file("/note.txt", "still answering\n")
    # The process and memory limits hold for the run's calls together: room for 22 sleepers.
    options = {**FAST, "max_concurrent": 22, "max_processes": 256, "memory_mb": 4096}

    async def scenario() -> list[float]:
        code_server = create_server(
            "code", fs_root=world.fs_root, apps_data_root=world.apps_root, options=options
        )
        files_server = create_server("filesystem", fs_root=world.fs_root, apps_data_root=world.apps_root)
        async with Client(code_server) as code, Client(files_server) as files:
            sleepers = [asyncio.create_task(code.call_tool("code_exec", {"code": "sleep 15", "timeout_s": 8}))
                        for _ in range(44)]  # fmt: skip
            latencies = []
            await asyncio.sleep(2.0)  # past the burst of sandbox starts
            for _ in range(3):
                await asyncio.sleep(0.3)
                started = time.monotonic()
                read = await files.call_tool("read_text_file", {"file_path": "/note.txt"})
                await anyio.to_thread.run_sync(lambda: None)  # a worker thread for /data/* is free too
                latencies.append(time.monotonic() - started)
                assert "still answering" in str(read.structured_content)
            results = await asyncio.gather(*sleepers)
            assert all(result.structured_content["timed_out"] for result in results)
            return latencies

    # Before the code server had its own pool, 44 sleepers held every shared worker thread
    # and each read waited for a sleeper to time out (5 s and more here). The bound leaves room
    # for a machine under heavy load.
    assert max(asyncio.run(scenario())) < 3.0


_MASK_PROC = """
set -e
mount --make-rprivate /
# What Docker and Kubernetes do to a container's /proc; the only procfs left is the masked one.
for m in $(awk '$3 == "proc" && $2 != "/proc" {print $2}' /proc/self/mounts | sort -r); do umount -l "$m"; done
for p in /proc/kcore /proc/keys /proc/timer_list /proc/latency_stats /proc/sched_debug; do
  if [ -e "$p" ]; then mount --bind /dev/null "$p"; fi; done
for p in /proc/acpi /proc/scsi /proc/asound; do if [ -d "$p" ]; then mount -t tmpfs -o ro tmpfs "$p"; fi; done
for p in /proc/bus /proc/fs /proc/irq /proc/sys /proc/sysrq-trigger; do
  if [ -e "$p" ]; then mount --bind "$p" "$p"; mount -o remount,bind,ro "$p" "$p"; fi; done
exec "$@"
"""

_IN_MASKED = """
import json, sys
from pathlib import Path
from mcp_servers.code.sandbox import SandboxLimits, run_command, sandbox_status
print("STATUS", json.dumps(sandbox_status().as_dict()))
print("FORCED", json.dumps(sandbox_status({"proc_mode": "procfs"}).as_dict()))
result = run_command(sys.argv[1], Path(sys.argv[2]), SandboxLimits(timeout_s=30, memory_mb=1024))
print("OUTPUT", json.dumps(result.output), result.exit_code, result.sandbox)
"""


@as_root
def test_masked_proc_falls_back_to_a_minimal_proc(world, tmp_path):
    import json

    mask = tmp_path / "mask.sh"
    mask.write_text(_MASK_PROC)
    script = tmp_path / "in_masked.py"
    script.write_text(_IN_MASKED)
    world.file("/data.txt", "6\n")
    command = ("python3 -c 'print(6*7)'; ls /filesystem; ls /proc; "
               "(echo 7 > /proc/sys/vm/swappiness) 2>/dev/null && echo WROTE; ls /proc/1 2>&1 | head -1; "
               f"{_NEW_USERNS}")  # fmt: skip
    completed = subprocess.run(
        ["unshare", "-m", "bash", str(mask), sys.executable, str(script), command, str(world.fs_root)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    lines = {
        line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in completed.stdout.splitlines() if " " in line
    }
    status, forced = json.loads(lines["STATUS"]), json.loads(lines["FORCED"])
    assert status["available"] and status["mode"] == "minimal-proc"
    assert not forced["available"] and "Can't mount proc" in forced["reason"]
    text, end = json.JSONDecoder().raw_decode(lines["OUTPUT"])
    exit_code, sandbox = lines["OUTPUT"][end:].split(None, 1)
    assert exit_code == "0" and sandbox == "bubblewrap (minimal /proc)"
    assert "42" in text and "data.txt" in text and "cpuinfo" in text
    assert "WROTE" not in text and "No such file or directory" in text  # no /proc/sys, no /proc/1
    assert "NESTED-USERNS" not in text  # the seccomp filter holds where --disable-userns cannot


@as_root
def test_refuses_when_the_sandbox_user_is_missing(world):
    with open_session("code", world, options={**FAST, "sandbox_user": "atoll-no-such-user"}) as session:
        error = session.error("code_exec", {"code": "echo hi"})
    assert error["code"] == "unsupported" and "atoll-no-such-user" in error["message"]
