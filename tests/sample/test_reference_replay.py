"""Replaying each reference solution against the real MCP servers (in process, in-memory MCP
client) leaves a world in which the real grader finds every checked criterion met."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import tarfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastmcp import Client

from atoll import AgentReportedStatus, RunStatus, Task, Trajectory
from grader.grading import grade_trial
from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES, create_server

from .conftest import CONSULTING, DEAL


def _materialise(sample_dir: Path, task: dict, base: Path) -> Path:
    base.mkdir(parents=True)
    with zipfile.ZipFile(sample_dir / "world_files_zipped" / f"{task['world_id']}.zip") as archive:
        archive.extractall(base)
    overlay = sample_dir / "task_files" / task["task_id"]
    if overlay.is_dir():
        shutil.copytree(overlay, base, dirs_exist_ok=True)
    return base


def _snapshot(base: Path, target: Path) -> Path:
    with tarfile.open(target, "w:gz") as archive:
        for path in sorted(base.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                info = tarfile.TarInfo(path.relative_to(base).as_posix())
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return target


async def _replay(task: dict, base: Path, user: dict) -> list[str]:
    errors = []
    clients: dict[str, Client] = {}
    try:
        for step in task["reference_solution"]["steps"]:
            # Gateway names are {server}_{tool}, and a server name may itself hold "_".
            server_name = next(
                n for n in (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES) if step["tool"].startswith(n + "_")
            )
            tool = step["tool"].removeprefix(server_name + "_")
            if server_name not in clients:
                server = create_server(
                    server_name,
                    fs_root=base / "filesystem",
                    apps_data_root=base / ".apps_data",
                    options={"user_email": user["user_email"], "user_name": user["user_name"]},
                )
                clients[server_name] = Client(server)
                await clients[server_name].__aenter__()
            result = await clients[server_name].call_tool(tool, step["arguments"], raise_on_error=False)
            if result.is_error:
                errors.append(f"{step['tool']}: {result.content[0].text if result.content else result}")
    finally:
        for client in clients.values():
            await client.__aexit__(None, None, None)
    return errors


@pytest.mark.slow
def test_reference_solution_replays_to_a_passing_world(sample_dir, tasks, tmp_path, task_id):
    task = tasks[task_id]
    worlds = {w["world_id"]: w for w in json.loads((sample_dir / "world_descriptions.json").read_text())}
    assert task["world_id"] in (CONSULTING, DEAL)
    base = _materialise(sample_dir, task, tmp_path / "world")
    before = _snapshot(base, tmp_path / "before.tar.gz")
    errors = asyncio.run(_replay(task, base, worlds[task["world_id"]]))
    assert not errors, "\n".join(errors)
    after = _snapshot(base, tmp_path / "after.tar.gz")
    trajectory = Trajectory(
        task_id=task_id,
        agent="replay",
        model="reference",
        status=RunStatus.completed,
        agent_reported_status=AgentReportedStatus.completed,
        final_answer=task["reference_solution"]["final_answer"],
        started_at=datetime(2024, 3, 1, tzinfo=UTC),
        ended_at=datetime(2024, 3, 1, tzinfo=UTC),
    )
    grade = asyncio.run(grade_trial(Task.model_validate(task), before, after, trajectory, None))
    # Replayed here against the servers alone, without the environment's coworker engine: whether
    # a persona was contacted is graded where the engine runs (tests/agents_runner, the replay
    # agent against the real environment, and test_coworker_sample_task.py).
    checked = {
        c["verifier_id"]
        for c in task["rubric"]
        if c.get("check") and c["check"]["kind"] != "coworker_contacted"
    }
    failures = [
        f"{v.verifier_id}: {v.verdict} ({v.rationale})"
        for v in grade.criteria
        if v.verifier_id in checked and v.verdict != "met"
    ]
    assert not failures, "\n".join(failures)
