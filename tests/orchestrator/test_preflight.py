"""Model endpoints are checked before anything is scheduled, through the real CLI, and a run
whose endpoint breaks midway stops with a line naming it (scripted server, real litellm). A
resume with nothing left to run checks none (and imports no model client)."""

import asyncio
import os
import subprocess
import sys
import time

import pytest
import yaml

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.llm.preflight import Probe, preflight
from atoll.loader import load_benchmark
from atoll.testing.scripted_llm import ScriptedLLM, refused_api_base
from atoll.trial import Outcome, TrialResult
from orchestrator.planner import plan_trials
from orchestrator.runner import run_experiment, work_left
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark
from tests.fresh_interpreter import run_cli
from tests.orchestrator.judge_only import judge_only_experiment

WRONG_KEY = {
    "status": 401,
    "body": {
        "error": {
            "message": "Incorrect API key provided: sk-wr***ng",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    },
}


def _atoll(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    return result, time.monotonic() - started


@pytest.fixture
def cli_start_s() -> float:
    """What starting the CLI with litellm imported costs on this machine right now (measured
    just before; under load it varies, hence the margin): the 15 s budget of the check itself
    is on top of it, and is measured exactly in-process below."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import litellm, atoll_cli.cli, orchestrator.runner"], check=True)
    return 1.5 * (time.monotonic() - started)


async def test_the_check_itself_takes_seconds_for_a_refused_a_401_and_a_missing_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedLLM(lambda request: WRONG_KEY) as server:
        probes = [
            Probe("openai/x", refused_api_base(), ["agent a"]),
            Probe("openai/y", server.api_base, ["judge"]),
            Probe("openai/gpt-4o-mini", None, ["agent b"]),
        ]
        for probe in probes:
            started = time.monotonic()
            with pytest.raises(AtollError, match="configuration error"):
                await preflight([probe])
            assert time.monotonic() - started < 15
        assert len(server.requests) == 1


def _experiment(tmp_path, *, agent_base: str | None, judge_base: str | None = None, **fields) -> str:
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t1")])
    spec = {
        "name": "checked",
        "benchmark": str(benchmark),
        "agents": [
            {"name": "oracle", "agent": "replay", "model": "replay"},
            {"name": "react", "agent": "react_toolbelt", "model": "openai/x", "api_base": agent_base},
        ],
        "judge": {"model": "openai/judge", "api_base": judge_base} if judge_base else {},
        "store": str(tmp_path / "store.db"),
        "output_dir": str(tmp_path / "out"),
        "artifacts": (tmp_path / "artifacts").as_uri(),
        **fields,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_run_with_an_api_base_where_nothing_listens_stops_in_seconds_naming_the_url(tmp_path, cli_start_s):
    api_base = refused_api_base()
    result, elapsed = _atoll("run", _experiment(tmp_path, agent_base=api_base), "--quiet")
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert line.count("\n") == 0 and "Traceback" not in line
    assert line.startswith("error: model endpoint check failed: openai/x at " + api_base + " (agent react)")
    assert "configuration error: connection refused" in line
    assert elapsed < 15 + cli_start_s
    assert not (tmp_path / "store.db").exists()  # nothing was scheduled


def test_run_with_a_wrong_key_stops_after_one_request_with_the_providers_message(tmp_path, cli_start_s):
    with ScriptedLLM([WRONG_KEY] * 5) as judge, ScriptedLLM([{"content": "ok"}]) as agent:
        path = _experiment(tmp_path, agent_base=agent.api_base, judge_base=judge.api_base)
        result, elapsed = _atoll("run", path, "--quiet")
        assert len(judge.requests) == 1 and len(agent.requests) == 1  # one probe each, no retries
        judge_base = judge.api_base
    assert result.returncode == 2, result.stderr
    assert (
        f"openai/judge at {judge_base} (judge): configuration error: HTTP 401: Incorrect API key provided"
        in result.stderr
    )
    # The exact calls: the judge's verdict prompt with its parameters, the agent's tool turn.
    assert "max_tokens" not in judge.requests[0] and judge.requests[0]["temperature"] == 0.0
    assert "CRITERION" in judge.requests[0]["messages"][-1]["content"]
    assert [tool["function"]["name"] for tool in agent.requests[0]["tools"]] == ["filesystem_read_text_file"]
    assert elapsed < 15 + cli_start_s


def test_no_preflight_skips_the_check(tmp_path):
    api_base = refused_api_base()
    path = _experiment(tmp_path, agent_base=api_base, executor="instant")
    result, _ = _atoll("run", path, "--quiet", "--no-preflight")
    assert result.returncode == 0, result.stderr  # the dry-run executor calls no model
    result, _ = _atoll("run", path, "--quiet", "--executor", "local", "--no-preflight", "--enqueue-only")
    assert result.returncode == 0 and "model endpoint" not in result.stderr


def test_worker_checks_the_endpoints_of_the_work_it_would_lease(tmp_path):
    api_base = refused_api_base()
    path = _experiment(tmp_path, agent_base=api_base)
    planned, _ = _atoll("run", path, "--enqueue-only")
    assert planned.returncode == 0, planned.stderr
    result, _ = _atoll("worker", "--store", str(tmp_path / "store.db"))
    assert result.returncode == 2 and f"openai/x at {api_base} (agent react)" in result.stderr
    assert "connection refused" in result.stderr


def test_demo_checks_the_configured_model(tmp_path):
    api_base = refused_api_base()
    result, _ = _atoll(
        "demo",
        "--output",
        str(tmp_path / "demo"),
        "--quiet",
        env={"ATOLL_MODEL": "openai/local", "ATOLL_API_BASE": api_base},
    )
    assert result.returncode == 2
    assert f"openai/local at {api_base} (agent react, judge)" in result.stderr


@pytest.mark.slow
def test_a_judge_key_revoked_midway_aborts_the_run_as_a_model_endpoint_error(tmp_path):
    with ScriptedLLM(lambda request: WRONG_KEY) as judge:
        spec = judge_only_experiment(
            tmp_path,
            "revoked",
            {"model": "openai/judge", "api_base": judge.api_base},
            max_infra_retries=2,
            infra_retry_backoff_s=0,
        )
        with pytest.raises(AtollError) as raised:
            asyncio.run(run_experiment(spec, quiet=True))
        judge_base = judge.api_base
    message = raised.value.message
    assert raised.value.code == "model_endpoint"
    assert "3 of 3 attempts met a model endpoint configuration error" in message
    assert f"openai/judge at {judge_base}" in message and "Incorrect API key" in message
    assert "own infrastructure" not in message
    report = (tmp_path / "out" / "revoked" / "report.md").read_text()
    assert "configuration error from model endpoint openai/judge" in report


_RESUME_WATCH = (
    "litellm",
    "fastmcp",
    "agents_runner.runner",
    "agents_runner.agents",
    "grader",
    "environment",
)


def test_a_local_resume_with_nothing_left_checks_no_endpoint_and_imports_no_model_client(tmp_path):
    # The trials are recorded by a dry run (same plan, same trial ids); resuming them with the
    # local executor has nothing to run: no endpoint is probed (this one refuses every
    # connection) and, in a fresh interpreter, neither litellm nor an agent is imported.
    api_base = refused_api_base()
    path = _experiment(tmp_path, agent_base=api_base, executor="instant")
    done, _ = _atoll("run", path, "--quiet")
    assert done.returncode == 0, done.stderr
    report = run_cli(["run", path, "--quiet", "--executor", "local"], _RESUME_WATCH)
    assert (report["code"], report["imported"]) == (0, []), report["stderr"]
    assert "2 of 2 trials done: 0 run now, 2 already done" in report["stdout"]
    assert "model endpoint" not in report["stderr"]


def test_a_resume_with_work_left_still_checks_the_endpoints(tmp_path):
    api_base = refused_api_base()
    path = _experiment(tmp_path, agent_base=api_base)
    planned, _ = _atoll("run", path, "--enqueue-only")
    assert planned.returncode == 0, planned.stderr
    result, _ = _atoll("run", path, "--quiet")
    assert result.returncode == 2, result.stderr
    assert f"openai/x at {api_base} (agent react)" in result.stderr and "connection refused" in result.stderr
    store = TrialStore(str(tmp_path / "store.db"))
    try:
        assert store.counts("checked")["pending"] == 2 and store.attempt_history("checked") == []
    finally:
        store.dispose()


def test_work_is_left_while_a_planned_trial_is_unrecorded_pending_leased_or_an_infra_error(tmp_path):
    trials = plan_trials(
        load_benchmark(write_benchmark(tmp_path / "bench", tasks=[make_task("t1"), make_task("t2")])),
        ExperimentSpec(name="e", benchmark="b", agents=[{"name": "o", "agent": "replay", "model": "replay"}]),
    )
    store = TrialStore(str(tmp_path / "store.db"))
    try:
        assert work_left(store, "e", trials)  # nothing recorded
        store.enqueue(trials[:1])
        assert work_left(store, "e", trials)  # one planned trial not recorded
        store.enqueue(trials)
        first, second = store.lease("w", limit=2, lease_s=60)
        store.complete(first, "w", TrialResult(trial_id=first.trial_id, outcome=Outcome.passed, score=1.0))
        assert work_left(store, "e", trials)  # one leased
        assert store.fail_infra(second, "w", "environment crashed", max_attempts=1) == "infra_error"
        assert work_left(store, "e", trials)  # an infra error is retried on resume
        store.reclaim("e")
        (again,) = store.lease("w", limit=1, lease_s=60)
        store.complete(again, "w", TrialResult(trial_id=again.trial_id, outcome=Outcome.failed, score=0.0))
        assert not work_left(store, "e", trials)
        assert not work_left(store, "e", trials[:1])
    finally:
        store.dispose()
