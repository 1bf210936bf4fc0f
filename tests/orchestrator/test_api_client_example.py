"""docs/api.md's Python client (examples/api_client.py) against a served orchestrator and a
worker sharing its store: submit twice with one key, follow the events to the run's end, page
the failed trials."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path

import yaml

from orchestrator.api import ApiSettings, create_app
from orchestrator.runner import run_worker
from tests.atoll.factories import make_task, write_benchmark
from tests.served_app import ServedApp

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "api_client.py"
TOKEN = "client-example-token"


def _example():
    spec = importlib.util.spec_from_file_location("api_client", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_documented_client_submits_once_follows_the_run_to_its_end_and_reads_the_failures(tmp_path):
    example = _example()
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(6)])
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path),
        api_token=TOKEN,
    )
    experiment = yaml.safe_dump(
        {
            "name": "nightly",
            "benchmark": str(benchmark),
            "runs": 2,
            "executor": "instant",
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        }
    )
    with ServedApp(create_app(settings)) as served, example.client(served.url, TOKEN) as api:
        first = example.submit(api, experiment, key="nightly-2026-12-06")
        again = example.submit(api, experiment, key="nightly-2026-12-06")
        assert first == again and first["enqueued"] == 12  # the second changed nothing

        worker = threading.Thread(
            target=asyncio.run, args=(run_worker(settings.store, executor_name="instant", quiet=True),)
        )
        worker.start()
        outcomes = example.follow(api, "nightly")  # returns once the run has finished
        worker.join(timeout=60)

        assert sum(outcomes.values()) == 12
        failed = example.failed_trials(api, "nightly")
        assert len(failed) == outcomes.get("fail", 0)
        assert all(trial["outcome"] == "fail" and "verdicts" in trial for trial in failed)
        assert api.get("/runs/nightly").json()["state"] == "finished"
