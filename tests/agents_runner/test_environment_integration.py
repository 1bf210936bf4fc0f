"""The agents against the real environment service and the real app servers.

A scripted model drives react_toolbelt through the gateway on a small world; the replay agent
solves every sample task (graded by the real grader with programmatic checks).
"""

from __future__ import annotations

import asyncio
import json
import mailbox
import shutil
import zipfile
from pathlib import Path

import httpx
import pytest

from agents_runner import run_agent
from atoll import Task
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus

from .conftest import (
    MCP_TOKEN,
    assert_every_call_answered_once,
    call,
    sample_root,
    start_environment,
    tool_messages,
)

USER = {"user_email": "alex@northwind.example", "user_name": "Alex Kim"}


@pytest.fixture
def small_world(tmp_path: Path):
    fs_root, apps = tmp_path / "filesystem", tmp_path / ".apps_data"
    (fs_root / "Reports").mkdir(parents=True)
    (fs_root / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M; churn 3.1%")
    (apps / "mail").mkdir(parents=True)
    mailbox.mbox(apps / "mail" / "All mail Including Spam and Trash.mbox").close()
    env = start_environment(fs_root, apps, USER, names=("mail", "filesystem"))
    try:
        yield env, apps
    finally:
        env.stop()


async def test_react_toolbelt_reads_a_file_and_sends_mail_through_the_real_gateway(small_world):
    env, apps = small_world
    script = [
        {
            "tool_calls": [
                call("toolbelt_add_tool", tool_name="filesystem_read_text_file"),
                call("toolbelt_add_tool", tool_name="mail_send_mail"),
            ]
        },
        {"tool_calls": [call("filesystem_read_text_file", file_path="/Reports/q3.txt"), call("filesystem_read_text_file", file_path="/../etc/passwd")]},
        {
            "tool_calls": [
                call("mail_send_mail", from_email=USER["user_email"], to_email="dana@northwind.example",
                     subject="Q3 revenue", body="Q3 revenue was 4.2M."),
                call("final_answer", answer="Sent: Q3 revenue 4.2M"),
            ]
        },
    ]  # fmt: skip
    with ScriptedLLM(script) as llm:
        trajectory = await run_agent(
            model="openai/scripted",
            api_base=llm.api_base,
            gateway_url=env.mcp_url,
            gateway_token=MCP_TOKEN,
            prompt="Mail Dana the Q3 revenue.",
        )
    assert trajectory.status == RunStatus.completed, trajectory.error
    listing = llm.requests[0]["messages"]
    assert listing[0]["role"] == "system"
    results = tool_messages(trajectory)
    assert "4.2M" in results["call_1_0"]
    assert trajectory.tool_calls[3].is_error  # the escape attempt is refused by the server
    assert "root:" not in results["call_1_1"]
    assert_every_call_answered_once(trajectory)
    box = mailbox.mbox(apps / "mail" / "All mail Including Spam and Trash.mbox")
    assert [message["Subject"] for message in box] == ["Q3 revenue"]


async def test_gateway_token_is_required(small_world):
    env, _ = small_world
    with ScriptedLLM([]) as llm:
        trajectory = await run_agent(
            model="openai/scripted",
            api_base=llm.api_base,
            gateway_url=env.mcp_url,
            gateway_token="wrong",
            prompt="p",
        )
    assert trajectory.status == RunStatus.error and trajectory.error.kind == "infrastructure"


def _sample_task_ids() -> list[str]:
    records = json.loads((sample_root() / "tasks_and_rubrics.json").read_text(encoding="utf-8"))
    return [record["task_id"] for record in records]


def _materialise(benchmark, task: Task, base: Path) -> None:
    with zipfile.ZipFile(benchmark.world_archives[task.world_id]) as archive:
        archive.extractall(base)
    overlay = benchmark.task_overlays.get(task.task_id)
    if overlay:
        shutil.copytree(overlay, base, dirs_exist_ok=True)
    (base / "filesystem").mkdir(exist_ok=True)
    (base / ".apps_data").mkdir(exist_ok=True)


def _snapshot(env, target: Path) -> Path:
    with httpx.stream("POST", f"{env.url}/data/snapshot", timeout=120) as reply:
        reply.raise_for_status()
        with target.open("wb") as out:
            for chunk in reply.iter_bytes():
                out.write(chunk)
    return target


def _server_of(tool: str) -> str:
    """The server a gateway tool name belongs to ({server}_{tool}; server names may hold '_')."""
    from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES

    return max(
        (name for name in SERVER_NAMES + OPTIONAL_SERVER_NAMES if tool.startswith(name + "_")), key=len
    )


@pytest.mark.slow
@pytest.mark.parametrize("task_id", _sample_task_ids())
def test_replay_agent_solves_every_sample_task(sample_benchmark, task_id, tmp_path):
    from grader import grade_trial  # the test grades; the agents runner never imports the grader

    task = sample_benchmark.task(task_id)
    world = sample_benchmark.world(task.world_id)
    user = {"user_email": world.user_email, "user_name": world.user_name}
    base = tmp_path / "world"
    _materialise(sample_benchmark, task, base)
    needed = sorted({_server_of(step.tool) for step in task.reference_solution.steps} | {"filesystem"})
    env = start_environment(base / "filesystem", base / ".apps_data", user, names=needed)
    try:
        before = _snapshot(env, tmp_path / "before.tar.gz")
        trajectory = asyncio.run(
            run_agent(
                model="replay",
                agent="replay",
                gateway_url=env.mcp_url,
                gateway_token=MCP_TOKEN,
                prompt=task.prompt,
                task_id=task.task_id,
                reference_solution=task.reference_solution,
            )
        )
        after = _snapshot(env, tmp_path / "after.tar.gz")
    finally:
        env.stop()
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.final_answer == task.reference_solution.final_answer
    assert_every_call_answered_once(trajectory)
    grade = asyncio.run(grade_trial(task, before, after, trajectory, None))
    checked = {criterion.verifier_id for criterion in task.rubric if criterion.check}
    failures = [f"{v.verifier_id}: {v.verdict} ({v.rationale})" for v in grade.criteria if v.verifier_id in checked and v.verdict != "met"]  # fmt: skip
    assert checked and not failures, "\n".join(failures)


def test_cli_runs_a_benchmark_task_with_the_replay_agent(sample_benchmark, tmp_path, monkeypatch, capsys):
    import sys

    from atoll.trajectory import Trajectory
    from atoll_cli.cli import main

    task = sample_benchmark.tasks[0]
    world = sample_benchmark.world(task.world_id)
    base = tmp_path / "world"
    _materialise(sample_benchmark, task, base)
    needed = sorted({_server_of(step.tool) for step in task.reference_solution.steps} | {"filesystem"})
    env = start_environment(base / "filesystem", base / ".apps_data", {"user_email": world.user_email, "user_name": world.user_name}, names=needed)  # fmt: skip
    out = tmp_path / "trajectory.json"
    args = ["atoll", "agent", "run", "--benchmark", sample_benchmark.root, "--task-id", task.task_id,
            "--agent", "replay", "--model", "replay", "--gateway-url", env.mcp_url, "--output", str(out), "--quiet"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", args)
    monkeypatch.setenv("ATOLL_GATEWAY_TOKEN", MCP_TOKEN)
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        env.stop()
    printed = capsys.readouterr().out
    assert exited.value.code in (0, None), printed
    trajectory = Trajectory.model_validate_json(out.read_text())
    assert trajectory.status == RunStatus.completed and trajectory.task_id == task.task_id
    assert "rubric" not in out.read_text() and task.rubric[0].criteria not in out.read_text()
    assert f"completed: {len(task.reference_solution.steps) + 1} steps" in printed
