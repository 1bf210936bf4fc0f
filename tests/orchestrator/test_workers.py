"""Several `atoll worker` processes sharing one PostgreSQL store."""

import subprocess
import sys

import yaml

from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark


def _atoll(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_two_workers_on_postgresql_complete_every_trial_exactly_once(tmp_path, postgres_url):
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(6)])
    experiment = {
        "name": "shared",
        "benchmark": str(benchmark),
        "agents": [
            {"name": "a", "agent": "replay", "model": "replay", "config": {"instant_delay_s": 0.05}},
            {"name": "b", "agent": "replay", "model": "other", "config": {"instant_delay_s": 0.05}},
        ],
        "runs": 3,
        "executor": "instant",
        "store": postgres_url,
        "output_dir": str(tmp_path / "out"),
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    planned = _atoll("run", str(path), "--enqueue-only")
    assert planned.returncode == 0, planned.stderr
    assert "36 trials planned, 36 new" in planned.stdout

    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "atoll_cli", "worker", "--store", postgres_url, "--concurrency", "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    completed = [int(out.split("worker finished: ")[1].split(" ")[0]) for out, _ in outputs]
    assert sum(completed) == 36

    store = TrialStore(postgres_url)
    assert store.counts("shared")["done"] == 36
    accepted = [h["trial_id"] for h in store.attempt_history("shared") if h["accepted"]]
    assert len(accepted) == 36 and len(set(accepted)) == 36
    store.dispose()

    report = _atoll("report", "shared", "--store", postgres_url, "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    assert "| a |" in report.stdout and "| b |" in report.stdout


def test_sigterm_drains_a_worker_and_gives_its_running_trials_back_without_spending_an_attempt(tmp_path):
    """What a pod's deletion does to `atoll worker --forever`: SIGTERM stops leasing, the
    running trials get ATOLL_DRAIN_GRACE_S, then their leases go back to the store at once."""
    import os
    import signal
    import time

    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t0"), make_task("t1")])
    store_url = str(tmp_path / "store.db")
    experiment = {
        "name": "drained",
        "benchmark": str(benchmark),
        "runs": 1,
        "executor": "instant",
        "agents": [{"name": "a", "agent": "replay", "model": "replay", "config": {"instant_delay_s": 600}}],
        "store": store_url,
        "output_dir": str(tmp_path / "out"),
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    assert _atoll("run", str(path), "--enqueue-only").returncode == 0
    alive = tmp_path / "worker.alive"
    # The store URL from the environment, as the Deployment gives it (never on a command line).
    worker = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "worker", "--concurrency", "2", "--forever", "--no-preflight"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "ATOLL_DRAIN_GRACE_S": "1",
            "ATOLL_STORE": store_url,
            "ATOLL_WORKER_ALIVE_FILE": str(alive),
        },
    )
    store = TrialStore(store_url)
    try:
        ends = time.monotonic() + 60
        while store.counts("drained")["leased"] < 2:
            assert time.monotonic() < ends and worker.poll() is None, worker.communicate()
            time.sleep(0.2)
        assert alive.exists() and time.time() - alive.stat().st_mtime < 30  # what the liveness probe reads
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert "no new trials; waiting up to 1 s for 2 running" in err
        counts = store.counts("drained")
        assert counts["pending"] == 2 and counts["leased"] == 0
        # Given back, not failed: the next lease is attempt 1 again.
        [first, *_] = store.lease("next", limit=2, lease_s=60)
        assert first.attempt == 1
    finally:
        if worker.poll() is None:
            worker.kill()
        store.dispose()
