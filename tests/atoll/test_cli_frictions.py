"""The CLI's small promises: offline price map, service start lines, runs not found, costs, resumes."""

import os
import select
import socket
import subprocess
import sys

import httpx
import pytest


def _python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_the_cli_never_fetches_litellms_price_map_from_the_internet():
    env = {key: value for key, value in os.environ.items() if key != "LITELLM_LOCAL_MODEL_COST_MAP"}
    result = _python("import atoll_cli.cli, litellm; print(len(litellm.model_cost) > 100)", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"  # the bundled map is loaded
    assert "cost map" not in result.stderr and "raw.githubusercontent" not in result.stderr, result.stderr


def test_a_cost_map_choice_of_the_user_is_kept():
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "False"}
    result = _python("import atoll_cli.cli, os; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])", env=env)
    assert result.stdout.strip() == "False"


SERVICES = {  # command, the name its listening line starts with
    "env": (["env", "serve"], "environment"),
    "agent": (["agent", "serve"], "agent runner"),
    "grade": (["grade", "serve"], "grader"),
    "orchestrator": (["orchestrator", "serve"], "orchestrator"),
}


def _service_env(tmp_path) -> dict:
    return {
        **os.environ,
        "ATOLL_FS_ROOT": str(tmp_path / "fs"),
        "ATOLL_APPS_DATA_ROOT": str(tmp_path / "apps"),
        "ATOLL_STORE": f"sqlite:///{tmp_path / 'store.db'}",
    }


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_on_a_port_in_use_says_so_in_one_line_and_exits_2(service, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command, _ = SERVICES[service]
        result = subprocess.run(
            [sys.executable, "-m", "atoll_cli", *command, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_service_env(tmp_path),
        )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr
        == f"error: port {port} on 127.0.0.1 is already in use; stop that process or pick --port\n"
    )


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_prints_one_listening_line_with_its_url_once_it_serves(service, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command, name = SERVICES[service]
    process = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", *command, "--port", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=_service_env(tmp_path),
    )
    try:
        ready, _, _ = select.select([process.stderr], [], [], 90)  # no line at all fails, not hangs
        line = process.stderr.readline() if ready else ""
        assert line == f"{name} listening on http://127.0.0.1:{port}\n"
        with httpx.Client(timeout=10) as client:  # the line comes only once requests are served
            assert client.get(f"http://127.0.0.1:{port}/health").status_code < 500
    finally:
        process.terminate()
        process.wait(timeout=30)


def _atoll_in(cwd, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def _store_with(path, *runs):
    from orchestrator.store import TrialStore

    store = TrialStore(f"sqlite:///{path}")
    for name in runs:
        store.save_experiment(name, {})
    store.dispose()


@pytest.mark.parametrize("command", ["report", "regrade"])
def test_a_run_not_found_lists_the_stores_runs_and_points_at_the_demos_store(command, tmp_path):
    _store_with(tmp_path / "other.db", "alpha", "beta")
    (tmp_path / "atoll-out" / "demo").mkdir(parents=True)
    _store_with(tmp_path / "atoll-out" / "demo" / "atoll.db", "demo")
    result = _atoll_in(tmp_path, command, "demo", "--store", "sqlite:///other.db")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "error: no run 'demo' in sqlite:///other.db; runs there: alpha, beta; `atoll demo` keeps its runs in "
        "atoll-out/demo/atoll.db: add --store sqlite:///atoll-out/demo/atoll.db\n"
    )
    empty = _atoll_in(tmp_path, command, "demo")  # the default store, never written
    assert (
        empty.returncode == 2
        and "in sqlite:///atoll-out/atoll.db; it has no runs; `atoll demo`" in empty.stderr
    )
    in_demo_store = _atoll_in(tmp_path, command, "nope", "--store", "atoll-out/demo/atoll.db")
    assert in_demo_store.stderr == "error: no run 'nope' in atoll-out/demo/atoll.db; runs there: demo\n"


def _report_output(tmp_path, *, terminal: bool) -> str:
    import pty

    from tests.orchestrator.test_unknown_cost import _store

    _store(tmp_path).dispose()
    command = [
        sys.executable,
        "-m",
        "atoll_cli",
        "report",
        "exp",
        "--store",
        f"sqlite:///{tmp_path / 'atoll.db'}",
        "--output",
        str(tmp_path / "out"),
    ]
    env = {**os.environ, "COLUMNS": "200"}
    if not terminal:
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env).stdout
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, stdout=follower, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode()


def test_the_leaderboard_is_a_drawn_table_on_a_terminal_and_markdown_when_piped(tmp_path):
    piped = _report_output(tmp_path, terminal=False)
    assert "| # | Agent |" in piped and "|---|" in piped
    drawn = _report_output(tmp_path, terminal=True)
    assert "|---|" not in drawn and "| # | Agent |" not in drawn
    assert "━" in drawn or "─" in drawn  # rich's table rules
    assert "unpriced" in drawn and "unknown" in drawn
