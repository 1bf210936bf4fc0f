"""`atoll agent run` (file in, file out; Archipelago inputs) and the HTTP service."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agents_runner.archipelago import load_agent_config_file
from agents_runner.service import create_app
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus, Trajectory
from atoll_cli.cli import main

from .conftest import ServedApp, call

ATOLL = [sys.executable, "-m", "atoll_cli"]


def _atoll(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([*ATOLL, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow
def test_cli_takes_archipelagos_inputs_and_flags_and_writes_the_trajectory(gateway, tmp_path: Path):
    (tmp_path / "initial_messages.json").write_text(
        json.dumps(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Find the reference."}]
        )
    )
    (tmp_path / "agent_config.json").write_text(
        json.dumps(
            {
                "agent_config_id": "loop_agent",
                "agent_name": "Loop Agent",
                "agent_config_values": {
                    "timeout": 600,
                    "max_steps": 7,
                    "tool_call_timeout": 30,
                    "llm_response_timeout": 60,
                },
            }
        )
    )
    (tmp_path / "extra_args.json").write_text(json.dumps({"temperature": 0.3}))
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 20},
    }
    script = [
        {"tool_calls": [call("mail_search_mail", query="Halvorsen")], "usage": usage},
        {"content": "HX-40917-Q", "usage": usage},
    ]
    out = tmp_path / "out" / "trajectory.json"
    with ScriptedLLM(script) as llm:
        result = _atoll(
            "agent", "run", "--trajectory-id", "traj-1",
            "--initial-messages", str(tmp_path / "initial_messages.json"),
            "--agent-config", str(tmp_path / "agent_config.json"), "--mcp-gateway-url", gateway.url,
            "--mcp-gateway-auth-token", gateway.token, "--orchestrator-model", "openai/scripted",
            "--orchestrator-extra-args", str(tmp_path / "extra_args.json"), "--api-base", llm.api_base,
            "--output", str(out), "--quiet",
        )  # fmt: skip
        system = llm.requests[0]["messages"][0]["content"]
        assert llm.requests[0]["temperature"] == 0.3
    assert result.returncode == 0, result.stderr
    assert "completed: 2 steps" in result.stdout and "final answer: HX-40917-Q" in result.stdout
    assert "260 (40 reasoning, 128 cached) tokens" in result.stdout
    trajectory = Trajectory.model_validate_json(out.read_text())
    assert trajectory.agent == "loop" and trajectory.status == RunStatus.completed
    assert trajectory.trial_id == "traj-1" and trajectory.agent_config["extra_args"] == {"temperature": 0.3}
    assert trajectory.agent_config["max_steps"] == 7 and trajectory.agent_config["tool_call_timeout_s"] == 30
    assert system.endswith("Be brief.")  # the task's system message follows the agent's own


def _atoll_in_process(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["atoll", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_cli_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path: Path):
    code, _, err = _atoll_in_process(monkeypatch, capsys, "agent", "run", "--prompt", "p", "--gateway-url",
                                     "http://127.0.0.1:9/mcp", "--model", "openai/x", "--output",
                                     str(tmp_path / "t.json"), "--agent", "nope")  # fmt: skip
    assert code == 2
    assert err.strip() == "error: unknown agent 'nope'; known agents: loop, react_toolbelt, replay"


def test_cli_run_ending_in_error_exits_1(monkeypatch, capsys, tmp_path: Path):
    out = tmp_path / "t.json"
    code, _, err = _atoll_in_process(monkeypatch, capsys, "agent", "run", "--prompt", "p", "--gateway-url",
                                     "http://127.0.0.1:9/mcp", "--model", "openai/x", "--output", str(out),
                                     "--quiet")  # fmt: skip
    assert code == 1
    assert "error (infrastructure)" in err
    assert Trajectory.model_validate_json(out.read_text()).status == RunStatus.error


def test_archipelago_config_mapping_reports_ignored_values(tmp_path: Path):
    path = tmp_path / "agent_config.json"
    path.write_text(
        json.dumps(
            {
                "agent_config_id": "react_toolbelt_agent",
                "agent_config_values": {
                    "timeout": 10800,
                    "max_steps": 250,
                    "context_window_tokens": 0,
                    "stream": True,
                    "jev_finish_gate": True,
                },
            }
        )
    )
    agent, config, ignored = load_agent_config_file(path)
    assert agent == "react_toolbelt"
    assert config.timeout_s == 10800 and config.context_window is None
    assert config.stream is True
    assert ignored == ["jev_finish_gate"]


async def test_service_start_poll_fetch_and_cancel(gateway, monkeypatch):
    script = [
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"tool_calls": [call("final_answer", answer="42")]},
        {"tool_calls": [call("toolbelt_list_tools")]},
        {"content": "slow", "delay_s": 5},
    ]
    with ScriptedLLM(script) as llm, ServedApp(create_app(token="svc")) as served:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={llm.api_base}")  # the operator's endpoint
        base = f"http://127.0.0.1:{served.port}"
        headers = {"Authorization": "Bearer svc"}
        body = {"model": "openai/x", "api_base": llm.api_base, "gateway_url": gateway.url,
                "gateway_token": gateway.token, "prompt": "What is it?", "task_id": "t1",
                "config": {"record_raw": True}}  # fmt: skip
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:
            assert (await client.get("/health")).status_code == 200
            assert (await client.get("/agents", headers={"Authorization": "Bearer wrong"})).status_code == 401
            started = await client.post("/runs", json=body)
            assert started.status_code == 202
            run_id = started.json()["run_id"]
            for _ in range(200):
                status = (await client.get(f"/runs/{run_id}")).json()
                if status["state"] == "finished":
                    break
                await asyncio.sleep(0.05)
            assert status["status"] == "completed" and status["steps"] == 2
            plain = (await client.get(f"/runs/{run_id}/trajectory")).json()
            assert "raw_model_calls" not in plain  # the trajectory as its file is written
            trajectory = Trajectory.model_validate(
                (await client.get(f"/runs/{run_id}/trajectory", params={"raw": "true"})).json()
            )
            assert trajectory.final_answer == "42" and trajectory.task_id == "t1"
            # record_raw: the raw calls travel on request, for the orchestrator to store beside it.
            assert [record["step"] for record in trajectory.raw_model_calls] == [1, 2]
            assert trajectory.raw_model_calls[0]["request"]["messages"] == llm.requests[0]["messages"]
            assert "api_key" not in json.dumps(trajectory.agent_config)

            second = (await client.post("/runs", json=body)).json()["run_id"]
            while len(llm.requests) < 4:
                await asyncio.sleep(0.05)
            assert (await client.get(f"/runs/{second}/trajectory")).status_code == 409
            so_far = (await client.get(f"/runs/{second}/trajectory", params={"so_far": "true"})).json()
            assert so_far["status"] == "running" and so_far["steps"] == 2 and len(so_far["tool_calls"]) == 1
            assert (await client.post(f"/runs/{second}/cancel")).status_code == 202
            for _ in range(100):
                status = (await client.get(f"/runs/{second}")).json()
                if status["state"] == "finished":
                    break
                await asyncio.sleep(0.05)
            assert status["status"] == "cancelled"
            assert (await client.get("/runs/nope")).json()["error"]["code"] == "unknown_run"
            bad = await client.post("/runs", json={**body, "agent": "nope"})
            assert bad.status_code == 400 and "unknown agent" in bad.json()["error"]["message"]


def test_serve_rejects_a_bad_port(monkeypatch, capsys):
    code, _, err = _atoll_in_process(monkeypatch, capsys, "agent", "serve", "--port", "70000")
    assert code == 2
    assert err.strip() == "error: port: Input should be less than 65536"


@pytest.mark.slow
def test_serve_command_answers_with_the_token_from_the_environment():
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "ATOLL_AGENT_TOKEN": "t0k",
        "ATOLL_AGENT_PORT": str(port),
    }
    process = subprocess.Popen(
        [*ATOLL, "agent", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                # Stop the server before reading its stderr: reading a live process's pipe
                # to the end would wait forever.
                process.kill()
                _, stderr = process.communicate(timeout=30)
                raise AssertionError(f"agent serve did not answer /health: {stderr.decode()[-2000:]}")
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/agents").status_code == 401
        listing = httpx.get(f"http://127.0.0.1:{port}/agents", headers={"Authorization": "Bearer t0k"}).json()
        assert [agent["name"] for agent in listing["agents"]] == ["loop", "react_toolbelt", "replay"]
        assert "max_steps" in listing["config_schema"]["properties"]
    finally:
        process.terminate()
        process.wait(timeout=30)
