"""atoll's environment as a v1.1 Harbor task's `world`: the image's entrypoint (`atoll env world`)
started as a plain process with the compose file's variables, seeding from a replica task's
world on boot, answering MCP at /mcp, and the collect step leaving the snapshots the verifier
reads (docs/interop.md "The world container")."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from fastmcp import Client

from tests.atoll import apex_replica as replica


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _names(path: Path) -> set[str]:
    with tarfile.open(path) as archive:
        return {member.name for member in archive if member.isfile()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The world entrypoint booted once for the module: (env, logs, process)."""
    root = tmp_path_factory.mktemp("harbor-world")
    v11 = replica.write_v11_directory(root / "v11")
    task = next(t for t in replica.tasks() if t["task_id"] == replica.FILE_TASK)
    logs = root / "logs" / "world"
    env = {
        **os.environ,
        "PORT": str(_free_port()),
        "WORLD_DATA_DIR": str(v11 / "worlds" / replica.LAW_WORLD),
        "TASK_FILES_DIR": str(v11 / "tasks" / replica.task_dir_name(task) / "environment" / "task_files"),
        "WORLD_LOGS_DIR": str(logs),
        "WORLD_CAPTURE_INITIAL_SNAPSHOT": "1",
        "WORLD_STATE_DIR": str(root / "state"),
        "ATOLL_FS_ROOT": str(root / "filesystem"),
        "ATOLL_APPS_DATA_ROOT": str(root / ".apps_data"),
    }
    env.pop("ATOLL_ENV_TOKEN", None)
    logs.mkdir(parents=True)
    (logs / ".initial_snapshot_done").touch()  # stale, from an earlier container on the volume
    (logs / "final_snapshot.tar.gz").write_bytes(b"stale")
    log = open(root / "world.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "env", "world", "--host", "127.0.0.1"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 150
        # The stale marker is removed first, so its presence now means this boot finished.
        while not (logs / ".initial_snapshot_done").exists() or (logs / "final_snapshot.tar.gz").exists():
            assert process.poll() is None, (root / "world.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (root / "world.log").read_text()[-3000:]
            time.sleep(0.2)
        yield env, logs, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_the_world_seeds_on_boot_and_answers_mcp(world):
    env, logs, process = world
    assert process.poll() is None
    # The initial snapshot holds the world's seed and the task's overlay.
    initial = _names(logs / "initial_snapshot.tar.gz")
    assert {"filesystem/Contracts/supply_agreement.txt", "filesystem/Trackers/tariffs.xlsx"} <= initial
    assert ".apps_data/mail/inbox.mbox" in initial
    assert not list(logs.glob("*.partial"))

    async def ask() -> tuple[list[str], str]:
        async with Client(f"http://127.0.0.1:{env['PORT']}/mcp") as client:
            tools = [tool.name for tool in await client.list_tools()]
            read = next(name for name in tools if name.endswith("read_text_file"))
            result = await client.call_tool(read, {"file_path": "/Contracts/supply_agreement.txt"})
            return tools, str(result.content[0].text)

    tools, text = asyncio.run(ask())
    assert any(name.endswith("list_files") for name in tools)
    assert "Liability cap: $2,500,000" in text


def test_the_collect_step_leaves_the_final_snapshot_the_verifier_reads(world):
    env, logs, _ = world
    from typer.testing import CliRunner

    from atoll_cli.cli import app

    variables = ("PORT", "WORLD_LOGS_DIR", "WORLD_STATE_DIR")
    result = CliRunner().invoke(
        app, ["env", "collect-snapshot"], env={**{k: env[k] for k in variables}, "ATOLL_ENV_TOKEN": None}
    )
    assert result.exit_code == 0, result.output
    final = logs / "final_snapshot.tar.gz"
    assert result.stdout.strip() == str(final)
    assert _names(final) == _names(logs / "initial_snapshot.tar.gz")
    # Without the world's token (kept where only the world's user reads) the control routes stay shut.
    token_file = Path(env["WORLD_STATE_DIR"]) / "env-token"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    import httpx

    refused = httpx.post(f"http://127.0.0.1:{env['PORT']}/data/snapshot", timeout=30)
    assert refused.status_code == 401


def test_a_world_atoll_cannot_serve_fails_the_boot(tmp_path):
    from atoll.errors import AtollError
    from environment.harbor_world import world_servers

    (tmp_path / "mcp_config.json").write_text('{"mcpServers": {"mail_server": {}, "crm_server": {}}}')
    with pytest.raises(AtollError, match="no server for crm_server"):
        world_servers(tmp_path)


def test_a_world_without_its_filesystem_archive_fails_the_boot(tmp_path):
    import httpx

    from atoll.errors import AtollError
    from environment.harbor_world import WorldSettings, seed

    settings = WorldSettings(world_dir=tmp_path, task_files=tmp_path / "none", logs=tmp_path / "logs")
    with (
        httpx.Client(base_url="http://127.0.0.1:9") as client,
        pytest.raises(AtollError, match="filesystem.tar.gz"),
    ):
        seed(settings, client)
