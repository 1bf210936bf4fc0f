"""An agent run in the agents runner service with record_raw: the orchestrator's remote step
brings its raw model calls back with the trajectory (GET /runs/{id}/trajectory?raw=true), so
they are stored beside it as when the agent runs in process."""

from __future__ import annotations

import httpx

from agents_runner.service import create_app
from atoll.benchmark import Task
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trial import TrialSpec
from orchestrator.executors.agent_runs import run_agent_remote
from orchestrator.executors.steps import EnvironmentEndpoint
from tests.agents_runner.conftest import call, gateway  # noqa: F401  (the gateway fixture)
from tests.atoll.factories import make_task
from tests.served_app import ServedApp


async def test_a_remote_run_brings_its_raw_calls_back(gateway, monkeypatch):  # noqa: F811
    script = [{"tool_calls": [call("final_answer", answer="42")]}]
    spec = TrialSpec(
        experiment="remote",
        task_id="t1",
        world_id="w",
        world_digest="d",
        agent_name="react",
        agent="react_toolbelt",
        model="openai/x",
        run_index=0,
        agent_config={"record_raw": True},
    )
    task = Task.model_validate(make_task("t1", prompt="What is it?"))
    environment = EnvironmentEndpoint(url=gateway.url.removesuffix("/mcp"), mcp_token=gateway.token)
    with ScriptedLLM(script) as llm, ServedApp(create_app(token="svc")) as served:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={llm.api_base}")
        spec.agent_config["api_base"] = llm.api_base
        async with httpx.AsyncClient(timeout=10) as http:
            trajectory = await run_agent_remote(
                http, f"http://127.0.0.1:{served.port}", environment, task, spec, token="svc", poll_s=0.05
            )
    assert trajectory.final_answer == "42"
    (record,) = trajectory.raw_model_calls
    assert record["step"] == 1 and record["request"]["messages"] == llm.requests[0]["messages"]
