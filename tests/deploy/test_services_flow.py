"""The compose deployment's flow without containers: the API enqueues the sample-style
experiment, a worker runs it against separately served environment, agents runner and
grader over HTTP (as the compose services are wired), and the report comes back."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
import uvicorn
import yaml
from fastapi.testclient import TestClient

from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from tests.atoll.factories import make_task, write_benchmark


class _Served:
    """A FastAPI app served by uvicorn on a free loopback port in a thread."""

    def __init__(self, app) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "service did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def benchmark_dir(tmp_path):
    tasks = [
        make_task(
            f"t{i}",
            rubric=[
                {
                    "verifier_id": f"t{i}-v1",
                    "criteria": "States the fee cap of $250,000",
                    "check": {"kind": "answer_regex", "pattern": r"250,000"},
                }
            ],
            reference_solution={
                "steps": [
                    {
                        "tool": "filesystem_read_text_file",
                        "arguments": {"file_path": "/Engagement/letter.txt"},
                    }
                ],
                "final_answer": "The fee cap is $250,000.",
            },
        )
        for i in range(2)
    ]
    return write_benchmark(tmp_path / "bench", tasks=tasks)


@pytest.mark.slow
def test_api_enqueues_and_a_worker_runs_trials_against_the_services_over_http(
    tmp_path, benchmark_dir, monkeypatch
):
    from agents_runner.service import create_app as agents_app
    from environment import EnvironmentServer, EnvironmentSettings
    from grader.service import create_app as grader_app

    roots = tmp_path / "environment"
    (roots / "filesystem").mkdir(parents=True)
    (roots / ".apps_data").mkdir()
    environment = EnvironmentServer(
        EnvironmentSettings(
            fs_root=roots / "filesystem",
            apps_data_root=roots / ".apps_data",
            env_token="env-secret",
            json_logs=False,
            log_level="WARNING",
        )
    ).start()
    calls: list[str] = []

    async def record(request, call_next):
        calls.append(f"{request.method} {request.url.path}")
        return await call_next(request)

    grading = grader_app()
    grading.middleware("http")(record)
    agents = agents_app(token="agent-secret")
    agents.middleware("http")(record)
    try:
        with _Served(agents) as agents_runner, _Served(grading) as grader:
            monkeypatch.setenv("ATOLL_ENVIRONMENT_URLS", environment.url)
            monkeypatch.setenv("ATOLL_ENV_TOKEN", "env-secret")
            monkeypatch.setenv("ATOLL_AGENTS_RUNNER_URL", agents_runner.url)
            monkeypatch.setenv("ATOLL_AGENT_TOKEN", "agent-secret")
            monkeypatch.setenv("ATOLL_GRADER_URL", grader.url)
            settings = ApiSettings(
                store=f"sqlite:///{tmp_path / 'store.db'}",
                output_dir=str(tmp_path / "out"),
                artifacts=(tmp_path / "artifacts").as_uri(),
                benchmark_roots=str(tmp_path),
            )
            experiment = {
                "name": "sample-compose",
                "benchmark": str(benchmark_dir),
                "runs": 1,
                "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
                "judge": {"model": None},
                "concurrency": {"trials": 1},
                "executor": "local",
            }
            with TestClient(create_app(settings)) as api:
                posted = api.post("/runs", content=yaml.safe_dump(experiment))
                assert posted.status_code == 202 and posted.json()["enqueued"] == 2
                summary = asyncio.run(run_worker(settings.store, concurrency=1, quiet=True))
                assert summary.completed == 2 and summary.infra_errors == 0
                report = api.get("/runs/sample-compose/report").json()
            assert report["agents"]["oracle"]["outcomes"] == {"pass": 2}
            assert calls.count("POST /grade") == 2  # graded by the grading service, not in the worker
            assert calls.count("POST /runs") == 2  # the agents ran in the agents runner
    finally:
        environment.stop()
