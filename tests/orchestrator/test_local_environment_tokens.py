"""An operator who sets the environments' tokens protects the local executor's own in-process
environments too, and the executor still reaches them: trials pass, none is an infra error."""

import asyncio
import json

import pytest

from atoll.experiment import ExperimentSpec
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.shared_sample import fresh_sample_benchmark


@pytest.mark.slow
def test_in_process_environments_with_tokens_are_reached(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOLL_ENV_TOKEN", "control-plane-token")
    monkeypatch.setenv("ATOLL_MCP_TOKEN", "mcp-token")
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    spec = ExperimentSpec.model_validate(
        {
            "name": "tokens",
            "benchmark": str(benchmark),
            "tasks": {"ids": [tasks[0]["task_id"]]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
            "store": str(tmp_path / "store.db"),
            "artifacts": (tmp_path / "artifacts").as_uri(),
            "output_dir": str(tmp_path / "out"),
            "max_infra_retries": 0,
        }
    )
    asyncio.run(run_experiment(spec, quiet=True))
    ((_spec, result, state, _attempts),) = TrialStore(spec.store).results("tokens")
    assert state == "done", result.error if result else state
    assert result.outcome.value == "pass", result.error
