"""A worker on a shared store meets a run whose stored experiment today's atoll refuses (one
saved by an older release, with an inline key say): that run is stopped with the reason, and
the worker goes on with every other run instead of crashing."""

import asyncio

from orchestrator.runner import run_experiment, run_worker
from orchestrator.store import TrialStore
from tests.atoll.factories import make_task, write_benchmark
from tests.orchestrator.test_runner import _spec


def test_a_run_whose_stored_spec_is_refused_does_not_stop_the_others(tmp_path):
    benchmark_dir = write_benchmark(tmp_path / "bench", tasks=[make_task(f"t{i}") for i in range(4)])
    store_url = str(tmp_path / "store.db")
    for name in ("old", "current"):
        spec = _spec(tmp_path, benchmark_dir, name=name, runs=1, store=store_url)
        asyncio.run(run_experiment(spec, quiet=True, enqueue_only=True))
    store = TrialStore(store_url)
    old = store.experiment_spec("old")
    old["agents"][0]["extra_args"] = {"api_key": "sk-from-an-older-release"}
    store.save_experiment("old", old)

    summary = asyncio.run(run_worker(store_url, quiet=True))

    assert summary.stopped == {"old": "bad_spec"}
    assert store.counts("current")["done"] == 4
    assert store.counts("old")["pending"] == 4  # kept for an atoll that can run it, not failed
    stop = store.run_record("old").stop
    assert stop["reason"] == "bad_spec" and "api_key" in stop["detail"]
    assert "sk-from-an-older-release" not in stop["detail"]
    store.dispose()
