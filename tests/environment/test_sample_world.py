"""The sample benchmark's worlds: populate from the world zip + task overlay, snapshot, compare."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest
from fastmcp import Client

from environment import EnvironmentServer
from tests.shared_sample import fresh_sample_benchmark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_sample_benchmark(tmp_path_factory.mktemp("sample") / "benchmark")


def _zip_files(world_zip: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(world_zip) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}


def _snapshot_files(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_sample_world_round_trip_with_task_overlay(benchmark, client, env_server):
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    task = next(t for t in tasks if (benchmark / "task_files" / t["task_id"]).is_dir())
    world_zip = benchmark / "world_files_zipped" / f"{task['world_id']}.zip"
    overlay = benchmark / "task_files" / task["task_id"]

    reply = client.post(
        "/data/populate",
        json={
            "sources": [
                {"url": world_zip.as_uri(), "subsystem": "world"},
                {"url": overlay.as_uri(), "subsystem": "world"},
            ]
        },
    )
    assert reply.status_code == 200, reply.text

    expected = _zip_files(world_zip)
    for path in overlay.rglob("*"):
        if path.is_file():
            expected[path.relative_to(overlay).as_posix()] = path.read_bytes()
    archive = client.post("/data/snapshot").content
    assert _snapshot_files(archive) == expected  # every world file, byte for byte, nothing else
    assert client.post("/data/snapshot").content == archive

    # The snapshot is itself a world: a second environment populated from it snapshots identically.
    settings = env_server.settings
    other = settings.model_copy(
        update={
            "fs_root": settings.fs_root.parent.parent / "w2" / "filesystem",
            "apps_data_root": settings.fs_root.parent.parent / "w2" / ".apps_data",
        }
    )
    with EnvironmentServer(other) as env2, httpx.Client(base_url=env2.url, timeout=60) as http2:
        populated = http2.post(
            "/data/populate", params={"subsystem": "world"}, files={"archive": ("s.tar.gz", archive)}
        )
        assert populated.status_code == 200, populated.text
        assert http2.post("/data/snapshot").content == archive


def test_agent_view_of_a_sample_world_through_the_real_servers(benchmark, settings):
    worlds = json.loads((benchmark / "world_descriptions.json").read_text())
    world = worlds[0]
    user = {key: world[key] for key in ("user_email", "user_name") if key in world}
    with EnvironmentServer(settings) as env, httpx.Client(base_url=env.url, timeout=120) as http:
        zip_url = (benchmark / "world_files_zipped" / f"{world['world_id']}.zip").as_uri()
        assert (
            http.post(
                "/data/populate", json={"sources": [{"url": zip_url, "subsystem": "world"}]}
            ).status_code
            == 200
        )
        config = {
            "mcpServers": {
                "mail": {"transport": "inprocess", "server": "mail", "options": user},
                "filesystem": {"transport": "inprocess", "server": "filesystem"},
            }
        }
        assert http.post("/apps", json=config).status_code == 200

        async def look_around():
            async with Client(env.mcp_url) as mcp:
                listing = await mcp.call_tool("filesystem_list_files", {"path": "/"})
                mails = await mcp.call_tool("mail_list_mails", {"limit": 5})
                return listing, mails

        listing, mails = asyncio.run(look_around())
        top_level = {p.name for p in settings.fs_root.iterdir()}
        assert any(name in listing.content[0].text for name in top_level)
        assert not mails.is_error and mails.content[0].text.strip()
