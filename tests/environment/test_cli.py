"""`atoll env serve`: the real command, in a subprocess, on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ATOLL = str(Path(sys.executable).parent / "atoll")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_env_serve_runs_the_service_over_the_given_roots(tmp_path):
    port = _free_port()
    fs_root, apps_root = tmp_path / "fs", tmp_path / "apps"
    env = {
        **os.environ,
        "ATOLL_ENV_TOKEN": "t0ken",
        "ATOLL_PRELOAD_SERVERS": "false",
        "ATOLL_LOG_LEVEL": "INFO",
    }
    process = subprocess.Popen(
        [
            ATOLL,
            "env",
            "serve",
            "--port",
            str(port),
            "--fs-root",
            str(fs_root),
            "--apps-data-root",
            str(apps_root),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "env serve did not start"
            time.sleep(0.1)
        assert fs_root.is_dir() and apps_root.is_dir()
        assert httpx.get(f"{base}/apps").status_code == 401  # token from the environment applies
        reply = httpx.post(
            f"{base}/apps",
            json={"mcpServers": {"filesystem": {"transport": "inprocess", "server": "filesystem"}}},
            headers={"Authorization": "Bearer t0ken"},
            timeout=60,
        )
        assert reply.status_code == 200 and "filesystem_read_text_file" in reply.json()["tools"]
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode()
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught
    assert process.returncode in (0, -15), output
    assert "Finished server process" in output
    assert '"logger": "environment.app"' in output  # JSON log lines


def test_env_serve_rejects_a_bad_port_in_one_line(tmp_path):
    result = subprocess.run(
        [
            ATOLL,
            "env",
            "serve",
            "--port",
            "70000",
            "--fs-root",
            str(tmp_path / "f"),
            "--apps-data-root",
            str(tmp_path / "a"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --port 70000 must be between 1 and 65535"
