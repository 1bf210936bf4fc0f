"""`atoll worker` through database faults, dead workers and a shared cost ceiling — real
CLI processes, a real PostgreSQL, and a TCP proxy in front of it that the test controls."""

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from orchestrator.policy import InfraHealth
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark
from tests.orchestrator.db_proxy import DatabaseProxy


@pytest.fixture
def proxy():
    database_proxy = DatabaseProxy()
    yield database_proxy
    database_proxy.close()


def _enqueue(tmp_path, store_url, *, tasks=6, runs=2, config=None, **fields) -> None:
    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(tasks)])
    experiment = {
        "name": "shared",
        "benchmark": str(benchmark),
        "agents": [{"name": "a", "agent": "replay", "model": "replay", "config": config or {}}],
        "runs": runs,
        "executor": "instant",
        "store": store_url,
        "output_dir": str(tmp_path / "out"),
    }
    experiment.update(fields)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    planned = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "run", str(path), "--enqueue-only"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stderr


def _worker(store_url, tmp_path, *extra: str, **env: str) -> subprocess.Popen:
    environment = {**os.environ, "ATOLL_SPOOL_DIR": str(tmp_path / "spool"), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "worker", "--store", store_url, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def _wait_for(condition, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _assert_exactly_once(store: TrialStore, total: int) -> None:
    assert store.counts("shared")["done"] == total
    history = store.attempt_history("shared")
    accepted = [h["trial_id"] for h in history if h["accepted"]]
    assert len(accepted) == total and len(set(accepted)) == total
    assert len(history) == total  # no second write of any result, accepted or not


def test_worker_survives_a_database_outage_without_losing_or_duplicating_results(
    tmp_path, postgres_url, proxy
):
    _enqueue(tmp_path, postgres_url, config={"instant_delay_s": 1.0})
    store = TrialStore(postgres_url)
    try:
        # A short retry window, so that results finished during the outage go through the spool.
        worker = _worker(
            proxy.url(postgres_url.rsplit("/", 1)[1]),
            tmp_path,
            "--concurrency",
            "3",
            ATOLL_STORE_RETRY_S="1.5",
            ATOLL_STORE_RETRY_MAX_BACKOFF_S="0.5",
        )
        # Cut at the first recorded result, while most trials are still to finish (on an idle
        # machine the whole run takes a few seconds).
        _wait_for(lambda: store.counts("shared")["done"] >= 1)
        proxy.cut()
        assert store.counts("shared")["done"] < 12, "the run finished before the outage began"
        time.sleep(6)
        assert worker.poll() is None  # still alive with the database gone
        proxy.restore()
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        # Whether a result waits in memory or in the spool depends on when the cut meets a
        # write; the spool itself is pinned by the dead-worker spool test below. What must hold
        # here: nothing lost, nothing written twice, and no spool left behind.
        assert "results spooled during store outages" in out, out
        _assert_exactly_once(store, 12)
        assert not list((tmp_path / "spool").rglob("*.jsonl"))
    finally:
        store.dispose()


def test_worker_survives_connections_terminated_while_it_completes_trials(tmp_path, postgres_url, proxy):
    _enqueue(tmp_path, postgres_url, tasks=10, runs=3, config={"instant_delay_s": 0.02})
    store = TrialStore(postgres_url)
    try:
        worker = _worker(proxy.url(postgres_url.rsplit("/", 1)[1]), tmp_path, "--concurrency", "4")
        # Cut every connection each time the worker has got a trial through since the last cut:
        # cuts land in the middle of its work all along, and a slow machine still lets it on
        # (cutting on a fixed 150 ms clock starved a worker whose reconnect took longer).
        done = -1
        while worker.poll() is None:
            time.sleep(0.15)
            now_done = store.counts("shared")["done"]
            if now_done != done:
                done = now_done
                proxy.drop_connections()
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        assert proxy.dropped > 0
        _assert_exactly_once(store, 30)
    finally:
        store.dispose()


def test_idle_worker_takes_over_a_dead_workers_leases_and_finishes_the_run(tmp_path, postgres_url):
    # First attempts hang for a minute; the worker that takes them dies holding the leases.
    _enqueue(
        tmp_path, postgres_url, tasks=2, runs=2, config={"instant_delay_s": 60, "instant_slow_attempts": 1}
    )
    store = TrialStore(postgres_url)
    try:
        doomed = _worker(postgres_url, tmp_path, "--concurrency", "4", ATOLL_LEASE_S="4")
        _wait_for(lambda: store.counts("shared")["leased"] == 4)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        # Nothing is pending, everything is leased by a dead worker: the next worker must not
        # exit idle, but wait for the leases to expire, take them over and finish the run.
        survivor = _worker(postgres_url, tmp_path, "--concurrency", "2", ATOLL_LEASE_S="4")
        out, err = survivor.communicate(timeout=120)
        assert survivor.returncode == 0, err
        assert "4 trials completed" in out
        assert store.counts("shared") | {"total": 4} == {
            "pending": 0,
            "leased": 0,
            "done": 4,
            "infra_error": 0,
            "cancelled": 0,
            "total": 4,
        }
        history = store.attempt_history("shared")
        assert len(history) == 4 and all(h["accepted"] and h["attempt"] == 2 for h in history)
    finally:
        store.dispose()


def test_two_workers_enforce_the_stored_cost_ceiling_together(tmp_path, postgres_url):
    _enqueue(
        tmp_path,
        postgres_url,
        tasks=10,
        runs=2,
        config={"instant_cost_usd": 0.02, "instant_delay_s": 0.2},
        max_total_cost_usd=0.05,
        concurrency={"trials": 1},
    )
    workers = [_worker(postgres_url, tmp_path, "--concurrency", "3") for _ in range(2)]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    store = TrialStore(postgres_url)
    try:
        spent = store.spent_usd("shared")
        assert spent <= 0.05 + 1e-9, spent  # today: every trial ran, $0.40
        assert store.counts("shared")["done"] == 2 and spent == pytest.approx(0.04)
        assert any("cost ceiling" in err for _, err in outputs)
    finally:
        store.dispose()


def test_a_stopped_run_is_tried_again_after_a_healthy_interval():
    health = InfraHealth(0.5, healthy_interval_s=0.3)
    for _ in range(6):
        health.record(failed=True)
    assert not health.allows()
    time.sleep(0.35)
    assert health.allows() and health.attempts == 0
    final = InfraHealth(0.5)  # atoll run and one-shot workers: a stop is final
    for _ in range(6):
        final.record(failed=True)
    time.sleep(0.05)
    assert not final.allows()


def test_worker_follows_the_stored_infra_retry_policy(tmp_path, postgres_url):
    _enqueue(
        tmp_path,
        postgres_url,
        tasks=2,
        runs=1,
        config={"instant_infra_error_tasks": ["t0"]},
        max_infra_retries=0,
        infra_error_abort_rate=1.0,
    )
    worker = _worker(postgres_url, tmp_path)
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    store = TrialStore(postgres_url)
    try:
        counts = store.counts("shared")
        assert (counts["done"], counts["infra_error"]) == (1, 1)
        # max_infra_retries 0 from the stored spec: one attempt (today's worker made 3).
        assert [h["outcome"] for h in store.attempt_history("shared")].count("infra_error") == 1
    finally:
        store.dispose()


def test_a_dead_workers_spool_is_written_once_by_the_next_worker(tmp_path, postgres_url):
    from atoll.trial import Outcome, TrialResult, TrialSpec
    from orchestrator.spool import SpooledWrite, spool_for
    from orchestrator.store import Completion

    store = TrialStore(postgres_url)
    try:
        store.enqueue(
            [
                TrialSpec(
                    experiment="shared",
                    task_id=f"t{i}",
                    world_id="w",
                    world_digest="d",
                    agent_name="a",
                    agent="replay",
                    model="m",
                    run_index=0,
                )
                for i in range(2)
            ]
        )
        leases = store.lease("dead:1:x", limit=2, lease_s=60)
        dead = spool_for(postgres_url, "dead:1:x", tmp_path / "spool")
        for lease in leases:
            result = TrialResult(trial_id=lease.trial_id, outcome=Outcome.passed, score=1.0)
            dead.add(SpooledWrite("complete", Completion(lease, "dead:1:x", result)))
        # The first result did reach the database before the worker died (its reply did not).
        store.complete_many([dead.entries[next(iter(dead.entries))].completion])
        dead._lock.release()  # the process is gone: its lock with it
        heir = spool_for(postgres_url, "heir:2:y", tmp_path / "spool")
        assert heir.adopt_orphans() == 2
        assert heir.flush(store) == 0
        heir.close()
        _assert_exactly_once(store, 2)
    finally:
        store.dispose()
