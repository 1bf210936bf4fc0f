"""No key, token or secret ever appears in a trial, trajectory, report, log line, viewer page or
API reply, and a submitter's endpoint never receives the service's own keys.

Canary values are planted where a shared deployment keeps its credentials (provider keys in the
environment, a secret provisioned for the submitter's endpoint, the services' tokens); a real
experiment then goes through the orchestrator API, preflight and a worker with the local
executor (a model-driven agent and an LLM judge through litellm, against scripted servers that
play the submitter's own endpoints), and every reply, viewer page, report, stored file and
captured log line is searched for them (docs/security.md, "Provider keys and endpoints")."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from atoll.llm.endpoints import forget_trusted_endpoints
from atoll.testing.scripted_llm import ScriptedLLM
from atoll_cli.commands.run import _experiments_with_work, check_models
from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app as create_viewer
from tests.shared_sample import fresh_sample_benchmark

PROVIDER_KEY = "sk-PROVIDER-CANARY-31f8a0c2"
SECRET = "sk-SECRET-CANARY-9be41d77"
TOKENS = {
    "ATOLL_API_TOKEN": "tok-API-CANARY-5c0e",
    "ATOLL_AGENT_TOKEN": "tok-AGENT-CANARY-77aa",
    "ATOLL_GRADER_TOKEN": "tok-GRADER-CANARY-0b19",
    "ATOLL_VIEW_TOKEN": "tok-VIEW-CANARY-41c9",
}
CANARIES = (PROVIDER_KEY, SECRET, *TOKENS.values())
TASK = "keystone-02-update-targets"  # one criterion is judged by the model
MET = {"content": json.dumps({"rationale": "the answer states it", "verdict": "met"})}


def agent_model(request: dict) -> dict:
    names = {tool["function"]["name"] for tool in request.get("tools") or []}
    if "final_answer" not in names:
        return {"content": "ok"}  # the preflight's probe
    call = {"name": "final_answer", "arguments": {"answer": "done", "status": "completed"}}
    return {"tool_calls": [call]}


def leaked(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [canary for canary in CANARIES if canary.encode() in data]


@pytest.mark.slow
def test_no_canary_leaves_its_place_through_a_whole_run(tmp_path, monkeypatch, caplog, capfd):
    forget_trusted_endpoints()
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "XAI_API_KEY"):
        monkeypatch.setenv(name, PROVIDER_KEY)
    for name, value in TOKENS.items():
        monkeypatch.setenv(name, value)
    for name in ("ATOLL_KEY_ENDPOINTS", "ATOLL_API_BASE", "ATOLL_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.DEBUG)
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'store.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path),
        api_token=TOKENS["ATOLL_API_TOKEN"],
    )
    replies: list[str] = []
    with ScriptedLLM(agent_model) as agent_llm, ScriptedLLM(lambda request: MET) as judge_llm:
        # The submitter's own endpoints, with its own key provisioned by the operator for them.
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A", SECRET)
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", f"{agent_llm.api_base},{judge_llm.api_base}")
        experiment = {
            "name": "canaries",
            "benchmark": str(benchmark),
            "tasks": {"ids": [TASK]},
            "agents": [
                {
                    "name": "react",
                    "agent": "react_toolbelt",
                    "model": "openai/scripted",
                    "api_base": agent_llm.api_base,
                    "api_key_secret": "TEAM_A",
                    # Raw requests and responses recorded too: the key must not be in them.
                    "config": {"max_steps": 3, "record_raw": True},
                }
            ],
            "judge": {"model": "openai/judge", "api_base": judge_llm.api_base, "api_key_secret": "TEAM_A"},
        }
        auth = {"Authorization": f"Bearer {TOKENS['ATOLL_API_TOKEN']}"}
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as api:
            # Hostile variants are refused before anything is stored or sent.
            for hostile in (
                {**experiment, "judge": {**experiment["judge"], "api_key_secret": None}},
                {
                    **experiment,
                    "judge": {
                        "model": "openai/judge",
                        "extra_args": {"fallbacks": [{"model": "openai/x", "api_base": judge_llm.api_base}]},
                    },
                },  # fmt: skip
                {
                    **experiment,
                    "agents": [{**experiment["agents"][0], "extra_args": {"api_key": PROVIDER_KEY}}],
                },
            ):
                refused = api.post("/runs", content=yaml.safe_dump(hostile), headers=auth)
                assert refused.status_code == 400, refused.text
                replies.append(refused.text)
            posted = api.post("/runs", content=yaml.safe_dump(experiment), headers=auth)
            assert posted.status_code == 202, posted.text
            replies.append(posted.text)
            # What ``atoll worker`` does: preflight the stored experiments, then lease and run.
            asyncio.run(check_models(_experiments_with_work(settings.store, None, None), quiet=True))
            summary = asyncio.run(run_worker(settings.store, quiet=True))
            assert summary.completed == 1
            for path in ("/runs", "/runs/canaries", "/runs/canaries/report"):
                answer = api.get(path, headers=auth)
                assert answer.status_code == 200, answer.text
                replies.append(answer.text)
        preflight_calls = sum(1 for r in agent_llm.requests if not r.get("tools") or len(r["tools"]) == 1)
        assert preflight_calls >= 1 and len(agent_llm.requests) >= 2 and len(judge_llm.requests) >= 2
        for llm in (agent_llm, judge_llm):  # the submitter's endpoints got its key, never ours
            for headers in llm.request_headers:
                assert headers["authorization"] == f"Bearer {SECRET}"
                assert not [value for value in headers.values() if PROVIDER_KEY in value]

    store = TrialStore(settings.store)
    (trial_id,) = {spec.trial_id for spec, *_ in store.results("canaries")}
    viewer = TestClient(create_viewer(store), base_url="http://127.0.0.1")
    trial = viewer.get(f"/api/trials/{trial_id}")
    assert trial.status_code == 200 and TASK in trial.text
    replies.append(trial.text)
    for path in ("/api/runs", "/api/runs/canaries", "/api/runs/canaries/trials", f"/trials/{trial_id}", "/"):
        replies.append(viewer.get(path).text)
    for what in ("trajectory", "grade"):
        download = viewer.get(f"/api/trials/{trial_id}/download/{what}")
        assert download.status_code == 200
        replies.append(download.text)
    # The raw model calls are beside the trajectory (not in it) and served per step.
    assert trial.json()["raw_model_calls"] is True
    raw = viewer.get(f"/api/trials/{trial_id}/raw/1")
    assert raw.status_code == 200, raw.text
    (exchange,) = raw.json()["exchanges"]
    assert "final_answer" in {tool["function"]["name"] for tool in exchange["request"]["tools"]}
    assert (
        exchange["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "final_answer"
    )
    replies.append(raw.text)

    assert [leaked(reply) for reply in replies if leaked(reply)] == []
    files = [path for path in tmp_path.rglob("*") if path.is_file() and not path.is_relative_to(benchmark)]
    assert any(path.suffix == ".json" and "report" in path.name for path in files)
    (raw_file,) = [path for path in files if path.name == "raw_model_calls.jsonl"]
    assert (raw_file.parent / "trajectory.json").is_file()
    assert b"raw_model_calls" not in (raw_file.parent / "trajectory.json").read_bytes()
    assert {
        str(path.relative_to(tmp_path)): leaked(path.read_bytes())
        for path in files
        if leaked(path.read_bytes())
    } == {}
    captured = capfd.readouterr()
    logs = "\n".join(record.getMessage() for record in caplog.records)
    assert leaked(captured.out + captured.err + logs) == []
    assert Path(tmp_path / "out").exists()
