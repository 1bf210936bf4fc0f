"""A trial that ends in an infrastructure error keeps its evidence (the turns it made, its
prompt, duration and error), a retried attempt links to the earlier ones, and a running
trial's trajectory is written as it grows: all through the real local executor, with the
agent's model served by the scripted OpenAI-compatible server (no mocks)."""

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from atoll.experiment import ExperimentSpec
from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.progress import ProgressView
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from orchestrator.viewer import create_app
from tests.shared_sample import fresh_sample_benchmark

TASK = "keystone-01-packaging-baseline"


def _agent_model(tool_steps: int, *, delay_s: float = 0.0):
    """A model that lists files for ``tool_steps`` steps, then answers."""

    def script(request):
        step = sum(1 for m in request["messages"] if m["role"] == "assistant") + 1
        if step <= tool_steps:
            call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
        else:
            call = {"name": "final_answer", "arguments": {"answer": "done", "status": "completed"}}
        return {"tool_calls": [call], "delay_s": delay_s}

    return script


def _spec(tmp_path: Path, name: str, api_base: str, judge: dict, **extra) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": name,
            "benchmark": str(fresh_sample_benchmark(tmp_path / "bench")),
            "tasks": {"ids": [TASK]},
            "agents": [
                {
                    "name": "react",
                    "agent": "react_toolbelt",
                    "model": "openai/scripted",
                    "api_base": api_base,
                    "config": {"max_steps": 20},
                }
            ],
            "judge": judge,
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            **extra,
        }
    )


def _environment(root: Path):
    from environment import EnvironmentServer, EnvironmentSettings

    (root / "filesystem").mkdir(parents=True)
    (root / ".apps_data").mkdir()
    settings = EnvironmentSettings(
        fs_root=root / "filesystem", apps_data_root=root / ".apps_data", json_logs=False, log_level="WARNING"
    )
    return EnvironmentServer(settings).start()


@pytest.mark.slow
def test_an_environment_that_dies_mid_trial_leaves_the_turns_prompt_and_duration_and_retries_link_back(
    tmp_path, monkeypatch
):
    environment = _environment(tmp_path / "env")
    monkeypatch.setenv("ATOLL_ENVIRONMENT_URLS", environment.url)
    agent = _agent_model(10)

    def dies_at_step_4(request):
        if sum(1 for m in request["messages"] if m["role"] == "assistant") == 3:
            # The environment crashes under the agent: no graceful goodbye to open sessions.
            environment._server.should_exit = environment._server.force_exit = True
            environment._thread.join(timeout=30)
        return agent(request)

    with ScriptedLLM(dies_at_step_4) as model:
        spec = _spec(
            tmp_path,
            "env-dies",
            model.api_base,
            {"model": None},
            max_infra_retries=1,
            infra_retry_backoff_s=0,
        )
        outcome = asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    ((trial_spec, result, state, attempts),) = store.results("env-dies")
    assert (state, attempts, result.outcome.value) == ("infra_error", 2, "infra_error")
    # The second attempt found no environment: it keeps its prompt, duration and error.
    assert result.error and result.trajectory_uri and result.duration_s > 0
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    detail = client.get(f"/api/trials/{trial_spec.trial_id}").json()
    assert detail["transcript"]["prompt"] and detail["trial"]["duration_s"] > 0
    assert detail["run_status"] == "error" and detail["run_error"]["kind"] == "infrastructure"
    # The first attempt, listed with its outcome and error, kept every step it made: 3 before
    # the environment died, 7 more against the dead one, and its answer (the final snapshot
    # then failed).
    first = detail["attempts"][0]
    assert (first["attempt"], first["outcome"], first["steps"]) == (1, "infra_error", 11)
    assert first["error"] and first["duration_s"] > 0
    earlier = json.loads(client.get(first["trajectory"]).content)
    assert earlier["steps"] == 11 and len(earlier["tool_calls"]) == 11

    report = json.loads(outcome.report_paths["json"].read_text())
    (group,) = report["failures"]
    assert group["outcome"] == "infra_error" and group["trials"] == [trial_spec.trial_id]
    (row,) = [t for t in report["trial_rows"] if t["trial_id"] == trial_spec.trial_id]
    assert row["artifacts"]["trajectory"] == result.trajectory_uri and row["duration_s"] > 0
    assert row["link"]  # report.md links the failure to the attempt's artifacts


@pytest.mark.slow
def test_a_running_trials_trajectory_grows_and_the_viewer_shows_its_steps_while_leased(tmp_path):
    with ScriptedLLM(_agent_model(8, delay_s=0.7)) as model:
        spec = _spec(tmp_path, "long-trial", model.api_base, {"model": None})
        runner = threading.Thread(target=lambda: asyncio.run(run_experiment(spec, quiet=True)))
        runner.start()
        seen: list[int] = []
        live_steps = None
        lines: set[str] = set()
        deadline = time.monotonic() + 60
        while runner.is_alive() and time.monotonic() < deadline:
            for path in (tmp_path / "artifacts").rglob("trajectory.json"):
                trajectory = json.loads(path.read_text())
                if trajectory["status"] == "running" and trajectory["steps"] not in seen:
                    seen.append(trajectory["steps"])
            store = TrialStore(spec.store)
            rows = store.results("long-trial") if store.experiment_spec("long-trial") else []
            if rows:  # atoll run's progress line, rendered as its live display does each refresh
                line = ProgressView("long-trial", store, quiet=True)._render().plain
                if "in flight: step" in line:
                    lines.add(line.split("in flight: ")[1])
            if rows and rows[0][2] == "leased" and live_steps is None:
                detail = TestClient(create_app(store), base_url="http://127.0.0.1").get(
                    f"/api/trials/{rows[0][0].trial_id}"
                )
                body = detail.json()
                if body["running"] and body["running"]["steps"] >= 2:
                    live_steps = body["running"]["steps"]
                    assert len(body["transcript"]["steps"]) >= 2
            store.dispose()
            time.sleep(0.2)
        runner.join(timeout=60)
    assert len(seen) >= 3 and seen == sorted(seen)  # read mid-run, several times, growing
    assert live_steps is not None
    assert len(lines) >= 3  # the line ticks: steps and elapsed time of the trial in flight move
    ((_trial, result, state, _attempts),) = TrialStore(spec.store).results("long-trial")
    final = json.loads(Path(result.trajectory_uri.removeprefix("file://")).read_text())
    assert state == "done" and final["status"] == "completed" and final["steps"] == 9


@pytest.mark.slow
def test_an_agents_runner_that_dies_mid_trial_leaves_the_steps_it_reported(tmp_path, monkeypatch):
    from agents_runner.service import create_app as agents_runner_app
    from tests.served_app import ServedApp

    agent = _agent_model(10, delay_s=1.2)
    runner = ServedApp(agents_runner_app())

    def dies_at_step_4(request):
        if sum(1 for m in request["messages"] if m["role"] == "assistant") == 3:
            runner.server.should_exit = runner.server.force_exit = True
        return agent(request)

    with ScriptedLLM(dies_at_step_4) as model, runner:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={model.api_base}")  # the runner's operator
        monkeypatch.setenv("ATOLL_AGENTS_RUNNER_URL", runner.url)
        spec = _spec(tmp_path, "runner-dies", model.api_base, {"model": None}, max_infra_retries=0)
        asyncio.run(run_experiment(spec, quiet=True))
    ((_trial, result, state, _attempts),) = TrialStore(spec.store).results("runner-dies")
    assert state == "infra_error" and "agents runner" in result.error and result.duration_s > 0
    # The steps the executor saw while polling the runner are the attempt's record.
    kept = json.loads(Path(result.trajectory_uri.removeprefix("file://")).read_text())
    assert kept["status"] == "error" and kept["steps"] >= 2 and result.steps == kept["steps"]
    assert kept["tool_calls"] and kept["messages"][0]["role"] in ("system", "user")
