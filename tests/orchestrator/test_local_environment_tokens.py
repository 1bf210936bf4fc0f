"""An operator who sets the environments' tokens protects the local executor's own in-process
environments too, and the executor still reaches them: trials pass, none is an infra error."""

import asyncio
import json

import pytest

from atoll.experiment import ExperimentSpec
from orchestrator.executors.local import _EnvironmentPool
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.shared_sample import fresh_sample_benchmark


@pytest.mark.slow
def test_in_process_environments_with_tokens_are_reached(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOLL_ENV_TOKEN", "control-plane-token")
    monkeypatch.setenv("ATOLL_MCP_TOKEN", "mcp-token")
    result, state = _one_sample_trial(tmp_path, "tokens")
    assert state == "done", result.error if result else state
    assert result.outcome.value == "pass", result.error


def _one_sample_trial(tmp_path, name: str):
    """The sample's first task with the replay agent, through the local executor: (result, state)."""
    benchmark = fresh_sample_benchmark(tmp_path / "bench")
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    spec = ExperimentSpec.model_validate(
        {
            "name": name,
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
    ((_spec, result, state, _attempts),) = TrialStore(spec.store).results(name)
    return result, state


def test_service_tokens_are_secrets_that_reach_only_the_requests(monkeypatch):
    """The executor's service settings hold their bearer tokens as secrets, like every service's
    own settings: a log line or error that prints the settings never shows one, and the
    environment endpoints still send the real value."""
    from orchestrator.executors.local import ServiceSettings

    monkeypatch.setenv("ATOLL_ENV_TOKEN", "env-secret-1")
    monkeypatch.setenv("ATOLL_MCP_TOKEN", "mcp-secret-2")
    monkeypatch.setenv("ATOLL_GRADER_TOKEN", "grader-secret-3")
    monkeypatch.setenv("ATOLL_ENVIRONMENT_URLS", "http://127.0.0.1:9")
    settings = ServiceSettings()
    shown = repr(settings) + str(settings) + settings.model_dump_json()
    assert not any(secret in shown for secret in ("env-secret-1", "mcp-secret-2", "grader-secret-3"))
    (endpoint,) = settings.environments()
    assert endpoint.headers() == {"Authorization": "Bearer env-secret-1"}


@pytest.mark.slow
def test_the_in_process_environments_keep_their_worlds_where_the_operator_says(tmp_path, monkeypatch):
    """ATOLL_ENVIRONMENTS_DIR (e.g. a tmpfs) holds the worlds the trials create and delete,
    instead of the output folder (docs/deploy.md)."""
    worlds = tmp_path / "worlds"
    monkeypatch.setenv("ATOLL_ENVIRONMENTS_DIR", str(worlds))
    laid_out: list[str] = []
    close = _EnvironmentPool.close

    def close_after_looking(pool: _EnvironmentPool) -> None:  # the run removes its worlds
        laid_out.extend(path.relative_to(worlds).as_posix() for path in worlds.rglob("*") if path.is_file())
        close(pool)

    monkeypatch.setattr(_EnvironmentPool, "close", close_after_looking)
    result, state = _one_sample_trial(tmp_path, "worlds")
    assert state == "done" and result.outcome.value == "pass", result.error if result else state
    assert any("/filesystem/" in path for path in laid_out), laid_out
    assert not (tmp_path / "out" / ".cache" / "environments").exists()
    assert list(worlds.iterdir()) == []  # removed when the run ended
