"""The run lifecycle on the command line: `atoll runs`, `cancel`, `pause`, `resume`, `requeue`,
`resize`, `archive` over the same functions as the API, each error one line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll_cli.cli import app
from orchestrator.runner import run_experiment, run_worker
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


def _enqueued(tmp_path, name="cli-run", **config) -> str:
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(2)])
    store = f"sqlite:///{tmp_path / 'atoll.db'}"
    spec = ExperimentSpec.model_validate(
        {
            "name": name,
            "benchmark": str(benchmark),
            "runs": 2,
            "executor": "instant",
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay", "config": config}],
            "store": store,
            "output_dir": str(tmp_path / "out"),
            "max_infra_retries": 0,
            "infra_retry_backoff_s": 0,
        }
    )
    asyncio.run(run_experiment(spec, enqueue_only=True, quiet=True))
    return store


def _atoll(*args: str):
    return CliRunner().invoke(app, list(args))


def test_each_verb_changes_the_run_and_says_so_in_one_line(tmp_path):
    store = _enqueued(tmp_path, instant_infra_error_tasks=["t0"])
    paused = _atoll("pause", "cli-run", "--store", store)
    assert paused.exit_code == 0, paused.output
    assert paused.output.startswith("run cli-run: paused; now paused (0 done, 4 pending")
    trial_store = TrialStore(store)
    try:
        assert trial_store.lease("w", limit=4, lease_s=60) == []
        assert "now queued" in _atoll("resume", "cli-run", "--store", store).output
        assert "at most 1 trials in flight" in _atoll("resize", "cli-run", "1", "--store", store).output
        capped = trial_store.lease("w", limit=4, lease_s=60, experiment="cli-run")
        assert len(capped) == 1
        assert "no run-wide concurrency cap" in _atoll("resize", "cli-run", "none", "--store", store).output
        # Both leases go back, or the worker below waits a minute for the first to expire.
        trial_store.release([*capped, *trial_store.lease("w", limit=4, lease_s=60, experiment="cli-run")])
    finally:
        trial_store.dispose()
    asyncio.run(run_worker(store, executor_name="instant", quiet=True))
    requeued = _atoll("requeue", "cli-run", "--store", store)
    assert "requeued 2 errored trials" in requeued.output and "2 pending" in requeued.output
    cancelled = _atoll("cancel", "cli-run", "--store", store)
    assert "cancelled 2 trials not yet run" in cancelled.output and "now cancelled" in cancelled.output
    assert "archived" in _atoll("archive", "cli-run", "--store", store).output
    assert _atoll("runs", "--store", store).output.strip() == "no runs"
    listed = _atoll("runs", "--store", store, "--archived")
    assert listed.output.split() == ["cli-run", "cancelled", "2/2", "done", "(archived)"]
    page = json.loads(_atoll("runs", "--store", store, "--archived", "--json").output)
    assert page["total"] == 1 and page["runs"][0]["counts"]["cancelled"] == 2


def test_mistakes_are_one_line_errors(tmp_path):
    store = _enqueued(tmp_path)
    unknown = _atoll("pause", "nope", "--store", store)
    assert isinstance(unknown.exception, AtollError) and "no run 'nope'" in unknown.exception.message
    assert "runs there: cli-run" in unknown.exception.message
    bad = _atoll("resize", "cli-run", "lots", "--store", store)
    assert isinstance(bad.exception, AtollError) and "concurrency 'lots'" in bad.exception.message
    missing = _atoll("runs", "--store", str(tmp_path / "none.db"))
    assert isinstance(missing.exception, AtollError) and "no trial store at" in missing.exception.message
    assert not (tmp_path / "none.db").exists()  # never created by a listing
    # Through the real entry point: one line on stderr, exit status 2, no traceback.
    process = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "archive", "cli-run", "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "error: run 'cli-run' is queued: nothing to archive while its trials may run; cancel or pause it first"
    ]
    for verb in ("runs", "cancel", "pause", "resume", "requeue", "resize", "archive"):
        assert _atoll(verb, "--help").exit_code == 0


def test_atoll_run_cancelled_from_outside_stops_cleanly_and_exits_4_saying_so(tmp_path):
    """A pipeline running `atoll run` must not read a run cancelled under it as complete."""
    import time

    import yaml

    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(3)])
    store = f"sqlite:///{tmp_path / 'atoll.db'}"
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "name": "cancelled-run",
                "benchmark": str(benchmark),
                "runs": 2,
                "executor": "instant",
                "concurrency": {"trials": 1},
                "agents": [
                    {"name": "oracle", "agent": "replay", "model": "replay", "config": {"instant_delay_s": 2}}
                ],
                "store": store,
                "output_dir": str(tmp_path / "out"),
            }
        )
    )
    running = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "run", str(experiment), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # cancel once the run is under way (one trial leased)
            assert running.poll() is None and time.monotonic() < deadline
            if (tmp_path / "atoll.db").exists():
                trial_store = TrialStore(store)
                try:
                    leased = (
                        "cancelled-run" in trial_store.experiments()
                        and trial_store.counts("cancelled-run")["leased"]
                    )
                finally:
                    trial_store.dispose()
                if leased:
                    break
            time.sleep(0.1)
        assert _atoll("cancel", "cancelled-run", "--store", store).exit_code == 0
        stdout, stderr = running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == 4, stderr
    assert "trials were cancelled with the run" in stderr.strip().splitlines()[-1]
    report = json.loads((tmp_path / "out" / "cancelled-run" / "report.json").read_text())
    assert report["banner"]["title"] == "CANCELLED"
    assert report["trials"]["cancelled"] >= 4 and report["trials"]["done"] >= 1
