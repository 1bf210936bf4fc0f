"""The sample task that needs what only a persona knows (keystone-10): the replay agent passes it
against the real environment with the world's personas and a scripted coworker model, and fails
it without them; the coworker model is shown the persona and the conversation, never the rubric,
the gold answer or the task's prompt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agents_runner import run_agent
from atoll.coworkers import read_exchanges
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus

from .conftest import MCP_TOKEN
from .test_environment_integration import _materialise, _snapshot

TASK = "keystone-10-ask-client-budget-cap"
REPLY = "Hi Priya, the board capped Phase 2 implementation at $1.85M on Wednesday. Margaret"


def _run(sample_benchmark, tmp_path: Path, llm: ScriptedLLM | None, *, personas: bool):
    import httpx

    from environment import EnvironmentServer, EnvironmentSettings
    from grader import grade_trial  # the test grades; the agents runner never imports the grader

    task = sample_benchmark.task(TASK)
    world = sample_benchmark.world(task.world_id)
    user = {"user_email": world.user_email, "user_name": world.user_name}
    base = tmp_path / "world"
    _materialise(sample_benchmark, task, base)
    if not personas:
        (base / ".apps_data" / "coworkers" / "personas.json").unlink()
    settings = EnvironmentSettings(
        fs_root=base / "filesystem",
        apps_data_root=base / ".apps_data",
        mcp_token=MCP_TOKEN,
        json_logs=False,
        log_level="WARNING",
        ready_timeout_s=120,
        coworker_model="openai/coworker-sim" if llm else None,
        coworker_api_base=llm.api_base if llm else None,
    )
    env = EnvironmentServer(settings, startup_timeout_s=120).start()
    try:
        servers = {
            name: {"transport": "inprocess", "server": name, "options": user}
            for name in ("mail", "filesystem")
        }
        assert httpx.post(f"{env.url}/apps", json={"mcpServers": servers}, timeout=120).status_code == 200
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
    grade = asyncio.run(grade_trial(task, before, after, trajectory, None))
    exchanges_file = base / ".apps_data" / "coworkers" / "exchanges.jsonl"
    exchanges = read_exchanges(exchanges_file.read_bytes()) if exchanges_file.exists() else []
    return task, trajectory, {v.verifier_id: v.verdict for v in grade.criteria}, exchanges


@pytest.mark.slow
def test_the_persona_task_passes_with_the_persona_and_fails_without(sample_benchmark, tmp_path):
    with ScriptedLLM([{"content": REPLY, "usage": {"prompt_tokens": 400, "completion_tokens": 30}}]) as llm:
        task, trajectory, verdicts, exchanges = _run(sample_benchmark, tmp_path / "with", llm, personas=True)
        (request,) = llm.requests
    assert set(verdicts.values()) == {"met"}, verdicts
    # The agent read Margaret's reply with the normal mail tools (the reference's search step).
    searched = trajectory.tool_calls[-1]
    assert "margaret.okonkwo@halvorsenfoods.example" in json.dumps(searched.model_dump(mode="json"))
    ((exchange),) = exchanges
    assert (exchange.persona, exchange.channel, exchange.status, exchange.reply) == (
        "Margaret Okonkwo",
        "mail",
        "replied",
        REPLY,
    )

    prompt = json.dumps(request["messages"], ensure_ascii=False)
    assert "Margaret Okonkwo" in prompt and "capped the Phase 2 implementation budget at $1.85M" in prompt
    assert "Could you tell me the cap the board set" in prompt  # the conversation
    assert "Tomás" not in prompt and "March 15, 2024" not in prompt  # the other persona's facts
    for hidden in [task.prompt, task.gold_output.answer, *(c.criteria for c in task.rubric)]:
        assert hidden not in prompt

    _, _, without, exchanges = _run(sample_benchmark, tmp_path / "without", None, personas=False)
    assert without[f"{TASK}-c1"] == "not_met" and exchanges == []
