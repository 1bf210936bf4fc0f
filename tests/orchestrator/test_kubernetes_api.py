"""The Kubernetes executor against an API server that misbehaves the way a loaded or
upgrading control plane does: 429/503 with Retry-After, stalled answers, reset connections,
a create whose answer is lost, outages longer than one call's retry budget. All through the
real ``kubernetes`` client over HTTP to the stand-in (no cluster is available here)."""

from __future__ import annotations

import asyncio
import time

import pytest

from atoll.loader import load_benchmark
from atoll.trial import Outcome, TrialResult
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.kubernetes import KubernetesExecutor
from orchestrator.executors.kubernetes_trial import PodTrialOutcome
from orchestrator.planner import plan_trials
from tests.deploy.kube_standin import later
from tests.orchestrator import test_kubernetes_executor as base
from tests.orchestrator.test_kubernetes_executor import _executor, _input_uri, _run_one, _settings, _spec

benchmark_dir, cluster = base.benchmark_dir, base.cluster  # the same fixtures

JOB_PATH = r"/jobs$"  # the list and the watch of the run's Jobs


def _healthy_kubelet(run_s: float = 0.3):
    """on_create: the pod runs for ``run_s``, writes a passed outcome, and the Job completes."""

    def on_create(standin, job):
        name = job["metadata"]["name"]
        directory = _input_uri(job).rsplit("/", 1)[0]
        trial_id = job["metadata"]["annotations"]["atoll.dev/trial-id"]

        def finish():
            outcome = PodTrialOutcome(
                result=TrialResult(trial_id=trial_id, outcome=Outcome.passed, score=1.0)
            )
            ArtifactStore(directory).put_bytes("outcome.json", outcome.model_dump_json().encode())
            with standin.lock:
                finished_at[name] = time.monotonic()
            standin.finish(name, succeeded=True)

        later(0.05, lambda: standin.set_pod(name, phase="Running"))
        later(run_s, finish)

    finished_at: dict[str, float] = {}
    on_create.finished_at = finished_at
    return on_create


def _deleted_while_running(standin, kubelet) -> list[str]:
    """Names of Jobs whose DELETE came before the Job had finished."""
    deletes = {
        path.rsplit("/", 1)[1]: at
        for at, method, path, _status in standin.requests
        if method == "DELETE" and "/jobs/" in path
    }
    return [name for name, at in deletes.items() if at < kubelet.finished_at.get(name, float("inf"))]


def test_a_few_percent_of_failing_api_calls_fail_no_trial(tmp_path, benchmark_dir, cluster):
    spec = _spec(tmp_path, benchmark_dir, runs=4)
    benchmark = load_benchmark(spec.benchmark)
    trials = plan_trials(benchmark, spec)
    executor = KubernetesExecutor(benchmark, spec, _settings(cluster, poll_s=0.01, api_retry_budget_s=15))
    cluster.on_create = kubelet = _healthy_kubelet(run_s=0.6)
    # Every kind of call: create, list, watch, events, lease, delete. (One watch serves all
    # trials, so there are few calls to hit: a high rate, to hit some.)
    cluster.error_rate = 0.2

    async def all_of_them():
        return await asyncio.gather(
            *(executor.run(trial, attempt=1) for trial in trials), return_exceptions=True
        )

    results = asyncio.run(all_of_them())
    assert [getattr(result, "outcome", result) for result in results] == [Outcome.passed] * 4
    failed = [entry for entry in cluster.requests if entry[3] == 503]
    assert len(failed) >= 2, "the error rate should have hit some calls"
    assert len(cluster.created) == 4 and not cluster.jobs
    assert not _deleted_while_running(cluster, kubelet)


def test_retry_after_is_honoured(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, api_retry_budget_s=10)
    cluster.on_create = _healthy_kubelet()
    # Four in a row: more than urllib3's own three retries would absorb. (The pod informer's
    # first list: no other call lists pods before it has answered.) A 503 with no Retry-After
    # is backed off (0.25 to 0.5 s), then each 429's Retry-After replaces the backoff for its
    # own wait: 1 s, even at the fourth failure whose backoff would be 2 to 4 s.
    cluster.fault("GET", r"/pods$", status=503, times=1)
    cluster.fault("GET", r"/pods$", status=429, retry_after="1", times=3)
    assert _run_one(executor, trial).outcome is Outcome.passed
    reads = [
        (at, status)
        for at, method, path, status in cluster.requests
        if method == "GET" and path.endswith("/pods")
    ]
    assert [status for _at, status in reads[:5]] == [503, 429, 429, 429, 200]
    gaps = [later - earlier for (earlier, _s), (later, _t) in zip(reads[:4], reads[1:5], strict=True)]
    assert 0.2 <= gaps[0] < 0.95
    assert all(0.95 <= gap < 1.9 for gap in gaps[1:])


def test_a_long_retry_after_is_cut_to_its_bound(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(
        tmp_path, benchmark_dir, cluster, api_retry_budget_s=10, api_retry_after_max_s=0.2
    )
    cluster.on_create = _healthy_kubelet()
    cluster.fault("GET", JOB_PATH, status=503, retry_after="3600")
    started = time.monotonic()
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert time.monotonic() - started < 5


def test_a_stalled_api_answer_times_out_and_is_retried(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, api_timeout_s=0.5)
    cluster.on_create = _healthy_kubelet()
    cluster.fault("GET", JOB_PATH, stall_s=15)  # a hung socket: never let it hold a thread
    started = time.monotonic()
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert time.monotonic() - started < 6


def test_reset_connections_and_a_lost_create_answer_make_one_job(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _healthy_kubelet()
    cluster.fault("POST", r"/jobs$", lose_answer=True)  # created, but the client never hears so
    cluster.fault("GET", JOB_PATH, reset=True, times=2)
    cluster.fault("GET", r"/pods$", reset=True)
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert len(cluster.created) == 1
    posts = [
        status
        for _at, method, path, status in cluster.requests
        if method == "POST" and path.endswith("/jobs")
    ]
    assert posts == [None, 409]  # the retry met its own Job


def test_an_api_outage_longer_than_a_calls_budget_neither_fails_nor_deletes_a_running_job(
    tmp_path, benchmark_dir, cluster
):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, api_retry_budget_s=0.2, poll_s=0.02)
    cluster.on_create = kubelet = _healthy_kubelet(run_s=1.5)
    # Once the Job exists, every read fails for a second (a control-plane upgrade). Inactive until
    # then: an outage from the start would hold the informers' first list, and the Job's creation
    # behind it, for as long as it lasts.
    outage = cluster.fault("GET", r"/(jobs|pods)$", status=503, times=None, until_s=0.0)
    real_on_create = cluster.on_create

    def on_create(standin, job):
        outage.until_s = time.monotonic() + 1.0
        standin.drop_watches()  # the API server goes away: open watches end, new ones fail
        real_on_create(standin, job)

    cluster.on_create = on_create
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert not _deleted_while_running(cluster, kubelet) and not cluster.jobs


def test_a_job_that_cannot_be_deleted_does_not_fail_the_finished_trial(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, api_retry_budget_s=0.3)
    cluster.on_create = _healthy_kubelet()
    cluster.fault("DELETE", r"/jobs/atoll-", status=503, times=None)
    assert _run_one(executor, trial).outcome is Outcome.passed
    assert len(cluster.jobs) == 1  # left to its ttlSecondsAfterFinished


def test_a_forbidden_call_is_not_retried(tmp_path, benchmark_dir, cluster):
    from orchestrator.executors.base import InfraError

    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    cluster.fault("POST", r"/jobs$", status=403, times=None)
    with pytest.raises(InfraError, match=r"create job: HTTP 403"):
        _run_one(executor, trial)
    assert [
        status
        for _at, method, path, status in cluster.requests
        if method == "POST" and path.endswith("/jobs")
    ] == [403]


def test_api_calls_are_rate_limited_on_the_client(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, poll_s=0.001, api_qps=20, api_burst=2)
    cluster.on_create = _healthy_kubelet(run_s=1.0)
    started = time.monotonic()
    assert _run_one(executor, trial).outcome is Outcome.passed
    elapsed = time.monotonic() - started
    assert len(cluster.requests) <= 20 * elapsed + 2 + 1, (len(cluster.requests), elapsed)
