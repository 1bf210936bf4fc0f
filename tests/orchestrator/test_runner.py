import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.trial import Outcome, TrialResult
from orchestrator.executors.base import InfraError
from orchestrator.executors.instant import InstantExecutor
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


@pytest.fixture
def benchmark_dir(tmp_path):
    tasks = [make_task(f"t{i}", domain=["Law", "Investment Banking"][i % 2]) for i in range(4)]
    return write_benchmark(tmp_path / "bench", tasks=tasks)


def _spec(tmp_path, benchmark_dir, **overrides) -> ExperimentSpec:
    fields = {
        "name": "exp",
        "benchmark": str(benchmark_dir),
        "agents": [{"name": "alpha", "agent": "replay", "model": "replay"}],
        "runs": 2,
        "executor": "instant",
        "store": str(tmp_path / "store.db"),
        "output_dir": str(tmp_path / "out"),
        "concurrency": {"trials": 3},
    }
    fields.update(overrides)
    return ExperimentSpec.model_validate(fields)


class CountingExecutor(InstantExecutor):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    async def run(self, spec, *, attempt):
        self.calls.append((spec.trial_id, attempt))
        return await super().run(spec, attempt=attempt)


def test_run_then_resume_runs_nothing_twice(tmp_path, benchmark_dir):
    spec = _spec(tmp_path, benchmark_dir)
    first = CountingExecutor()
    outcome = asyncio.run(run_experiment(spec, executor_factory=lambda b, s: first, quiet=True))
    assert outcome.counts["done"] == 8 and len(first.calls) == 8
    report = json.loads(outcome.report_paths["json"].read_text())
    assert report["metrics"]["overall"]["alpha"]["trials_graded"] == 8
    assert "## Leaderboard" in outcome.report_paths["md"].read_text()
    assert "<svg" in outcome.report_paths["html"].read_text()
    # Trials are named as the benchmark names their tasks (stored with the run, not re-read).
    assert {row["task_id"]: row["task_name"] for row in report["trial_rows"]} == {
        f"t{i}": f"Task t{i}" for i in range(4)
    }

    second = CountingExecutor()
    again = asyncio.run(run_experiment(spec, executor_factory=lambda b, s: second, quiet=True))
    assert second.calls == [] and again.newly_enqueued == 0 and again.counts["done"] == 8


def test_adding_runs_only_runs_the_new_trials(tmp_path, benchmark_dir):
    asyncio.run(run_experiment(_spec(tmp_path, benchmark_dir), quiet=True))
    more = CountingExecutor()
    outcome = asyncio.run(
        run_experiment(_spec(tmp_path, benchmark_dir, runs=3), executor_factory=lambda b, s: more, quiet=True)
    )
    assert len(more.calls) == 4 and outcome.counts["done"] == 12


class FlakyExecutor(InstantExecutor):
    """t0 always hits an infrastructure failure; everything else passes."""

    async def run(self, spec, *, attempt):
        if spec.task_id == "t0":
            raise InfraError("environment did not become ready")
        return TrialResult(trial_id=spec.trial_id, outcome=Outcome.passed, score=1.0, attempt=attempt)


def test_infra_errors_are_retried_then_reported_not_failed(tmp_path, benchmark_dir):
    spec = _spec(
        tmp_path, benchmark_dir, max_infra_retries=1, infra_error_abort_rate=0.9, infra_retry_backoff_s=0.01
    )
    outcome = asyncio.run(run_experiment(spec, executor_factory=lambda b, s: FlakyExecutor(), quiet=True))
    assert outcome.counts["infra_error"] == 2 and outcome.counts["done"] == 6
    store = TrialStore(spec.store)
    history = [h for h in store.attempt_history("exp") if h["outcome"] == "infra_error"]
    assert len(history) == 4  # two trials × (1 try + 1 retry)
    report = json.loads(outcome.report_paths["json"].read_text())
    alpha = report["metrics"]["overall"]["alpha"]
    assert alpha["excluded_trials"] == {"infra_error": 2}
    assert alpha["trials_graded"] == 6 and alpha["pass_at_1"]["value"] == 1.0  # t0 is not counted as a fail
    assert "2 infra_error" in outcome.report_paths["md"].read_text()


def test_high_infra_error_rate_aborts_with_a_clear_report(tmp_path, benchmark_dir):
    spec = _spec(tmp_path, benchmark_dir, max_infra_retries=0, infra_error_abort_rate=0.1)

    class Broken(InstantExecutor):
        async def run(self, spec, *, attempt):
            raise InfraError("gateway refused connection")

    with pytest.raises(
        AtollError, match=r"aborted: \d+ of \d+ attempts failed in atoll's own infrastructure"
    ):
        asyncio.run(run_experiment(spec, executor_factory=lambda b, s: Broken(), quiet=True))
    # The report opens with the cause, recorded in the store for any later `atoll report`.
    lines = (tmp_path / "out" / "exp" / "report.md").read_text().splitlines()
    assert (
        lines[2].startswith("> **ABORTED**") and "attempts failed in atoll's own infrastructure" in lines[2]
    )
    store = TrialStore(spec.store)
    try:
        assert store.run_record("exp").stop["reason"] == "infra_error_rate"
    finally:
        store.dispose()


def test_an_interrupted_run_records_the_interrupt_for_its_report(tmp_path, benchmark_dir):
    from orchestrator.report import build_report

    spec = _spec(tmp_path, benchmark_dir, concurrency={"trials": 1})

    class Slow(InstantExecutor):
        started = asyncio.Event()

        async def run(self, spec, *, attempt):
            self.started.set()
            await asyncio.sleep(60)

    async def interrupt() -> None:
        task = asyncio.create_task(run_experiment(spec, executor_factory=lambda b, s: Slow(), quiet=True))
        await Slow.started.wait()
        task.cancel()  # what Ctrl-C does to the running coroutine
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt())
    store = TrialStore(spec.store)
    try:
        report = build_report(store, "exp")
    finally:
        store.dispose()
    assert report["banner"]["kind"] == "interrupted"
    assert report["banner"]["detail"] == "8 of 8 trials were not finished"


def test_cost_ceiling_stops_scheduling_before_it_is_passed(tmp_path, benchmark_dir):
    spec = _spec(
        tmp_path,
        benchmark_dir,
        max_total_cost_usd=0.35,
        concurrency={"trials": 1},
        agents=[{"name": "alpha", "agent": "replay", "model": "replay", "config": {"instant_cost_usd": 0.1}}],
    )
    outcome = asyncio.run(run_experiment(spec, quiet=True))
    assert outcome.summary.stopped_reason == "cost_ceiling"
    assert outcome.counts["done"] == 3 and outcome.summary.cost_usd == pytest.approx(0.3)
    banner = outcome.report_paths["md"].read_text().splitlines()[2]
    assert (
        banner.startswith("> **STOPPED**")
        and "the run's cost ceiling ($0.3500) would have been passed" in banner
    )


def test_kill_9_then_resume_gives_exactly_one_result_per_trial(tmp_path, benchmark_dir):
    spec = _spec(
        tmp_path,
        benchmark_dir,
        runs=5,
        concurrency={"trials": 2},
        agents=[{"name": "alpha", "agent": "replay", "model": "replay", "config": {"instant_delay_s": 0.3}}],
    )
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    command = [sys.executable, "-m", "atoll_cli", "run", str(path), "--quiet"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    store = TrialStore(spec.store)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            counts = store.counts("exp")
        except Exception:
            continue
        if counts["done"] >= 4 and counts["leased"] > 0:
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    interrupted = store.counts("exp")
    assert 0 < interrupted["done"] < 20 and interrupted["leased"] > 0

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    final = store.counts("exp")
    assert final["done"] == 20 and final["leased"] == 0 and final["pending"] == 0
    accepted = [h["trial_id"] for h in store.attempt_history("exp") if h["accepted"]]
    assert len(accepted) == 20 and len(set(accepted)) == 20
    ran_now, taken_up = 20 - interrupted["done"], interrupted["leased"]
    assert (
        f"20 of 20 trials done: {ran_now} run now ({taken_up} left unfinished by an earlier run), "
        f"{interrupted['done']} already done"
    ) in resumed.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "20 of 20 trials done: 0 run now, 20 already done" in again.stdout


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbenchmark: /nope\nagents: []\n")
    result = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "run", str(bad)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "agents" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_agent_config_fails_before_any_trial(tmp_path, benchmark_dir):
    spec = _spec(
        tmp_path,
        benchmark_dir,
        executor="local",
        agents=[{"name": "a", "agent": "react_toolbelt", "model": "openai/x", "config": {"max_stepz": 3}}],
    )
    with pytest.raises(AtollError, match=r"agents.0.config: max_stepz: Extra inputs are not permitted"):
        asyncio.run(run_experiment(spec, quiet=True))
    unknown = _spec(
        tmp_path,
        benchmark_dir,
        executor="local",
        agents=[{"name": "a", "agent": "reactt", "model": "openai/x"}],
    )
    with pytest.raises(AtollError, match=r"agents.0.agent: unknown agent 'reactt'"):
        asyncio.run(run_experiment(unknown, quiet=True))
