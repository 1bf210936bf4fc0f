"""code_exec: real bubblewrap sandbox, and the escape suite (each attempt contained)."""

import os
import socket
import threading
import time

import pytest

from mcp_servers.code.cgroup import RunCgroup
from tests.mcp_servers.helpers import make_world, open_session

FAST = {"timeout_s": 60, "max_write_mb": 20, "max_file_mb": 10, "memory_mb": 1024, "max_processes": 64}


@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path)
    world.file("/data/numbers.csv", "a,b\n1,2\n3,4\n")
    world.app_file("mail/inbox.mbox", "From x\nSubject: APPS-DATA-CANARY\n\nsecret\n")
    return world


@pytest.fixture
def code(world):
    with open_session("code", world, options=FAST) as session:
        yield session


def _run(session, command, **extra):
    return session.ok("code_exec", {"code": command, **extra})


def test_runs_python_with_the_analysis_libraries_over_the_world(code, world):
    script = (
        "import pandas, numpy, scipy, openpyxl, docx, pptx, matplotlib\n"
        "frame = pandas.read_csv('data/numbers.csv')\n"
        "frame.to_excel('out.xlsx', index=False)\n"
        "print(int(frame['b'].sum()))\n"
    )
    world.file("/job.py", script)
    result = _run(code, "cd /filesystem && python3 job.py && pwd")
    assert result["exit_code"] == 0, result["output"]
    assert result["output"].splitlines() == ["6", "/filesystem"]
    assert (world.fs_root / "out.xlsx").stat().st_size > 0  # written through to the world


def test_consolidated_mode(world):
    with open_session("code", world, mode="consolidated", options=FAST) as session:
        assert sorted(session.tool_names()) == ["code", "code_schema"]
        result = session.ok("code_exec", {"code": "echo hello"})  # sent as code(action="exec")
        assert result["output"] == "hello\n" and result["exit_code"] == 0


def test_exit_status_and_empty_command(code):
    assert _run(code, "exit 3")["exit_code"] == 3
    assert code.error("code_exec", {"code": "  "})["code"] == "invalid_argument"


def test_app_data_and_host_files_are_invisible(code, world, tmp_path_factory):
    host_secret = tmp_path_factory.mktemp("host") / "secret.txt"
    host_secret.write_text("HOST-CANARY")
    command = (
        f"cat {host_secret} 2>&1; ls /.apps_data {world.apps_root} /root /work 2>&1; "
        # Not the interpreter's prefixes (gigabytes of read-only libraries under /work, /root),
        # nor package and container image caches under /var (gigabytes more on a CI machine).
        "grep -rs --exclude-dir=apt --exclude-dir=docker --exclude-dir=containerd --exclude-dir=atoll-ci-docker "
        "APPS-DATA-CANARY /filesystem /tmp /etc /home /srv /var 2>/dev/null | head -3; echo done"
    )
    output = _run(code, command, timeout_s=60)["output"]
    assert "HOST-CANARY" not in output and "APPS-DATA-CANARY" not in output
    assert "No such file or directory" in output and output.rstrip().endswith("done")


def test_server_environment_variables_are_not_visible(code, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-CANARY")
    output = _run(code, "env; cat /proc/1/environ | tr '\\0' '\\n'")["output"]
    assert "ENV-CANARY" not in output and "PATH=" in output


def test_no_network_even_to_loopback(code):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(3)
    port = listener.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(_accept(listener)), daemon=True).start()
    command = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\" 2>&1"
    result = _run(code, command)
    time.sleep(0.5)
    assert result["exit_code"] != 0 and "Connection refused" in result["output"]
    assert accepted == [] or accepted == [None]
    listener.close()


def _accept(listener):
    try:
        return listener.accept()
    except OSError:
        return None


def _sandbox_processes() -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if b"BOMB-MARKER" in handle.read():
                        count += 1
            except OSError:
                pass
    return count


def test_fork_bomb_is_contained_and_cleaned_up(code):
    started = time.monotonic()
    result = _run(code, ": BOMB-MARKER; bomb() { bomb | bomb & }; bomb; sleep 5", timeout_s=3)
    assert time.monotonic() - started < 20
    assert result["timed_out"] or result["exit_code"] is not None
    # The sandbox's PID namespace dies with it; the kernel reaps the rest within moments.
    deadline = time.monotonic() + 15
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sandbox_processes() == 0
    assert _run(code, "echo alive")["output"] == "alive\n"  # the server is still healthy


_FORK_MANY = (
    'python3 -c "\nimport os, time\nstarted = 0\nfor _ in range(200):\n'
    "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
    '    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    started += 1\nprint(started)\n"'
)


def test_the_process_ceiling_holds_even_when_the_server_runs_as_root(code, monkeypatch):
    # RLIMIT_NPROC never binds processes that are root outside the sandbox's user namespace
    # (as here, when the server runs as root); the run's pids cgroup does.
    made = []  # this run's groups: other test processes (pytest-xdist workers) have their own
    create = RunCgroup.create

    def recording_create(limits, parent=None):
        made.append(create(limits, parent))
        return made[-1]

    monkeypatch.setattr(RunCgroup, "create", recording_create)
    started = int(_run(code, _FORK_MANY)["output"].split()[-1])
    assert 10 < started < FAST["max_processes"]
    assert made and all(group is not None and group.groups for group in made)
    assert not [path for group in made for path in group.groups if path.exists()]  # gone with the run


def test_memory_bomb_is_contained(code):
    result = _run(code, "python3 -c 'x = bytearray(4 << 30)'")
    assert result["exit_code"] != 0 and "MemoryError" in result["output"]
    assert _run(code, "echo alive")["exit_code"] == 0


def test_filling_the_disk_is_stopped(code, world):
    result = _run(
        code, "for i in $(seq 1 1000); do head -c 5000000 /dev/zero > fill_$i.bin; done; echo finished"
    )
    assert result["killed_reason"] and "wrote more than 20 MB" in result["killed_reason"]
    assert "finished" not in result["output"]
    written = sum(p.stat().st_size for p in world.fs_root.glob("fill_*.bin"))
    assert written < 500 * 1024 * 1024  # stopped within one watchdog interval, not after 5 GB
    big = _run(code, "rm -f fill_*.bin; head -c 50000000 /dev/zero > one.bin; echo rc=$?")
    assert "rc=1" in big["output"] or big["exit_code"] != 0  # SIGXFSZ / EFBIG at the per-file limit
    assert (world.fs_root / "one.bin").stat().st_size <= 10 * 1024 * 1024


def test_sleep_past_the_timeout_is_killed(code):
    started = time.monotonic()
    result = _run(code, "sleep 60", timeout_s=1)
    assert result["timed_out"] is True and result["exit_code"] is None
    assert time.monotonic() - started < 10


def test_background_processes_do_not_survive(code, world):
    result = _run(code, "(sleep 1; touch /filesystem/late.txt) & disown; echo started")
    assert result["output"] == "started\n"
    time.sleep(2.5)
    assert not (world.fs_root / "late.txt").exists()


def test_output_is_capped_while_reading(world):
    options = {**FAST, "max_output_chars": 1000}
    with open_session("code", world, options=options) as session:
        result = session.ok("code_exec", {"code": "head -c 50000000 /dev/urandom | base64"})
    assert result["truncated"] is True and len(result["output"]) == 1000
    assert result["output_bytes"] > 60_000_000


def test_refuses_without_bubblewrap_unless_outer_sandbox_trusted(world):
    options = {**FAST, "bwrap_path": "/nonexistent/bwrap"}
    with open_session("code", world, options=options) as session:
        error = session.error("code_exec", {"code": "echo hi"})
    assert error["code"] == "unsupported" and "bubblewrap not found" in error["message"]
    with open_session("code", world, options={**options, "trust_outer_sandbox": True}) as session:
        result = session.ok("code_exec", {"code": "echo hi; pwd"})
    assert result["output"] == f"hi\n{world.fs_root}\n" and result["sandbox"] == "outer (trusted)"
