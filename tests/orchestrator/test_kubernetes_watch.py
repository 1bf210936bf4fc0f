"""One list-and-watch per executor instead of per-trial polling: trials read the Job and pod
state from a watch; a stream that ends is resumed from its resourceVersion; a version the
server has compacted away (410 Gone) makes the executor list again, and nothing is missed.
Through the real ``kubernetes`` client over HTTP to the stand-in (no cluster is available)."""

from __future__ import annotations

import asyncio
import time

from atoll.loader import load_benchmark
from atoll.trial import Outcome
from orchestrator.executors.kubernetes import KubernetesExecutor
from orchestrator.planner import plan_trials
from tests.deploy.kube_standin import later
from tests.orchestrator import test_kubernetes_executor as base
from tests.orchestrator.test_kubernetes_api import _healthy_kubelet
from tests.orchestrator.test_kubernetes_executor import _executor, _run_one, _settings, _spec

benchmark_dir, cluster = base.benchmark_dir, base.cluster  # the same fixtures


def _calls(cluster, method: str, ending: str) -> int:
    return sum(1 for _at, m, path, _s in cluster.requests if m == method and path.endswith(ending))


def test_many_trials_share_one_watch_of_jobs_and_one_of_pods(tmp_path, benchmark_dir, cluster):
    spec = _spec(tmp_path, benchmark_dir, runs=6)
    benchmark = load_benchmark(spec.benchmark)
    trials = plan_trials(benchmark, spec)
    executor = KubernetesExecutor(benchmark, spec, _settings(cluster, poll_s=0.01, max_pending=10))
    cluster.on_create = _healthy_kubelet(run_s=1.0)

    async def all_of_them():
        try:
            return await asyncio.gather(*(executor.run(trial, attempt=1) for trial in trials))
        finally:
            await executor.aclose()

    results = asyncio.run(all_of_them())
    assert [result.outcome for result in results] == [Outcome.passed] * 6
    assert _calls(cluster, "WATCH", "/jobs") == 1 and _calls(cluster, "WATCH", "/pods") == 1
    # No per-trial reads of a Job's status, however fast the trials poll their timers.
    assert not [path for _at, method, path, _s in cluster.requests if method == "GET" and "/jobs/" in path]


def test_an_ended_watch_resumes_from_the_last_resource_version_without_listing_again(
    tmp_path, benchmark_dir, cluster
):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, watch_timeout_s=1)  # the server ends it
    cluster.on_create = _healthy_kubelet(run_s=2.6)
    assert _run_one(executor, trial).outcome is Outcome.passed
    job_watches = [version for _at, kind, version in cluster.watches if kind == "Job"]
    assert len(job_watches) >= 2
    assert all(
        int(later_) >= int(earlier) for earlier, later_ in zip(job_watches, job_watches[1:], strict=False)
    )
    assert int(job_watches[-1]) > int(job_watches[0])  # the changes seen moved it on
    assert executor.jobs.lists == 1 and executor.pods.lists == 1


def test_a_410_gone_lists_again_and_misses_no_change(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    healthy = _healthy_kubelet(run_s=0.3)

    def on_create(standin, job):
        healthy(standin, job)

        def outage_and_compaction():
            # The API server is away while the Job completes (at 0.3 s), and its history is
            # compacted meanwhile: the completion is only in a fresh list.
            standin.fault("GET", r"/(jobs|pods)$", status=503, times=None, until_s=time.monotonic() + 0.6)
            standin.drop_watches()
            later(0.35, standin.compact)

        later(0.15, outage_and_compaction)

    cluster.on_create = on_create
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert executor.jobs.lists >= 2, "the 410 should have made the Job informer list again"
    assert not cluster.jobs


async def _until(condition, timeout_s: float = 10.0) -> None:
    ends = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < ends, "condition not reached"
        await asyncio.sleep(0.02)


def test_after_a_410_the_cache_stays_stale_until_a_list_succeeds(tmp_path, benchmark_dir, cluster):
    # The resumed stream opens, then answers 410 Gone; the list that follows fails. The
    # cache missed changes meanwhile: trials must not read it as fresh.
    executor, _trial = _executor(tmp_path, benchmark_dir, cluster, watch_timeout_s=1)

    async def scenario():
        await executor._ensure_started()
        try:
            assert executor.jobs.stale_since is None
            lists = cluster.fault("GET", r"/jobs$", status=503, times=None, watch=False)
            cluster.compact()  # the stream ends at its timeout and resumes from a compacted version
            await _until(lambda: executor.jobs.resource_version is None)  # the 410 arrived
            await _until(lambda: _calls(cluster, "GET", "/jobs") >= 1)  # a list failed
            await asyncio.sleep(0.3)
            assert executor.jobs.stale_since is not None, "a failed re-list left the cache marked fresh"
            lists.times = 0  # the API recovers: the next list makes the cache fresh again
            await _until(lambda: executor.jobs.stale_since is None)
            assert executor.jobs.resource_version is not None
        finally:
            await executor.aclose()

    asyncio.run(scenario())
