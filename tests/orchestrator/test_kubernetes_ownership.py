"""Who owns a trial Job: the executor's Lease, a reaper for Jobs of owners that are gone, and
adoption of a still-running Job when its trial is leased again (a worker restarted) — so no
trial runs twice and no Job is left behind. Through the real ``kubernetes`` client over
HTTP to the stand-in (no cluster is available here)."""

from __future__ import annotations

import asyncio
import copy
import threading
import time

from atoll.loader import load_benchmark
from atoll.trial import Outcome
from orchestrator.artifacts import ArtifactStore
from orchestrator.executors.base import InfraError
from orchestrator.executors.kubernetes import KubernetesExecutor
from orchestrator.executors.kubernetes_trial import PodTrialOutcome
from orchestrator.planner import plan_trials
from tests.deploy.kube_standin import later
from tests.orchestrator import test_kubernetes_executor as base
from tests.orchestrator.test_kubernetes_api import _healthy_kubelet
from tests.orchestrator.test_kubernetes_executor import _settings, _spec

benchmark_dir, cluster = base.benchmark_dir, base.cluster  # the same fixtures

MANAGED = {"app.kubernetes.io/managed-by": "atoll-orchestrator"}


def _two_workers(tmp_path, benchmark_dir, cluster, **settings):
    spec = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(spec.benchmark)
    [trial] = plan_trials(benchmark, spec)
    first = KubernetesExecutor(benchmark, spec, _settings(cluster, owner="worker-a", **settings))
    second = KubernetesExecutor(benchmark, spec, _settings(cluster, owner="worker-b", **settings))
    return first, second, trial


async def _crash(executor: KubernetesExecutor) -> None:
    """What a killed worker leaves: no more renewals, watches or reaping; its Lease is not
    released (it expires)."""
    for task in executor._background:
        task.cancel()
    await executor.jobs.stop()
    await executor.pods.stop()
    executor._closed = True


def _kubelet_held_until(release: threading.Event):
    """A kubelet whose pod runs until ``release`` is set, then succeeds."""
    healthy = _healthy_kubelet(run_s=0.1)
    return lambda standin, job: (
        standin.set_pod(job["metadata"]["name"], phase="Running"),
        later(0, lambda: (release.wait(30), healthy(standin, job))),
    )


async def _killed_mid_trial(old: KubernetesExecutor, trial, cluster) -> None:
    """``old`` starts the trial's attempt 1 and is killed once its pod runs (its Job stays)."""
    running = asyncio.create_task(old.run(trial, attempt=1))
    await _until(lambda: any(pod["status"].get("phase") == "Running" for pod in cluster.pods.values()))
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await _crash(old)


async def _until(condition, timeout_s: float = 10.0) -> None:
    ends = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < ends, "condition not reached"
        await asyncio.sleep(0.02)


def test_a_restarted_worker_adopts_the_running_job_instead_of_starting_a_duplicate(
    tmp_path, benchmark_dir, cluster
):
    old, new, trial = _two_workers(tmp_path, benchmark_dir, cluster, orphan_after_s=30)
    release = threading.Event()
    # The pod runs until the test lets it finish (after the new worker adopted it).
    cluster.on_create = _kubelet_held_until(release)

    async def scenario():
        await _killed_mid_trial(old, trial, cluster)  # the worker is killed mid-trial …
        assert len(cluster.jobs) == 1  # … and its Job keeps running
        adopting = asyncio.create_task(new.run(trial, attempt=2))  # the store leased the trial again
        try:
            await _until(lambda: new.adopted)
            release.set()
            return await adopting
        finally:
            await new.aclose()

    result = asyncio.run(scenario())
    assert result.outcome is Outcome.passed and result.attempt == 2
    [job] = cluster.created
    assert len(cluster.created) == 1, "a second Job was started for the same trial"
    assert new.adopted == [job["metadata"]["name"]]
    assert (job["metadata"]["name"], {"metadata": {"labels": {"atoll.dev/owner": "worker-b"}}}) in [
        (name, {"metadata": {"labels": patch["metadata"]["labels"]}}) for name, patch in cluster.patches
    ]
    assert not cluster.jobs, "the adopted Job was left behind"


def test_jobs_of_owners_whose_lease_expired_are_reaped_and_live_ones_kept(tmp_path, benchmark_dir, cluster):
    def job(name, labels=None, annotations=None):
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "labels": {**MANAGED, **(labels or {})},
                "annotations": annotations or {},
            },
            "spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": []}}},
        }

    cluster.create_pods = False
    cluster.add_lease("atoll-worker-dead", holder="dead", renewed_s_ago=3600, duration_s=60)
    cluster.add_lease("atoll-worker-live", holder="live", renewed_s_ago=1, duration_s=60)
    cluster.add_job(job("of-a-dead-owner", {"atoll.dev/owner": "dead"}))
    cluster.add_job(job("of-a-live-owner", {"atoll.dev/owner": "live"}))  # e.g. waiting for a node
    cluster.add_job(job("of-an-owner-without-lease", {"atoll.dev/owner": "gone"}))
    cluster.add_job(
        job("older-atoll-stale", annotations={"atoll.dev/heartbeat": str(int(time.time() - 3600))})
    )
    cluster.add_job({**job("someone-else"), "metadata": {"name": "someone-else", "labels": {}}})
    cluster.create_pods = True
    spec = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(spec.benchmark)
    [trial] = plan_trials(benchmark, spec)
    executor = KubernetesExecutor(benchmark, spec, _settings(cluster, orphan_after_s=0.5, reap_s=0.1))
    cluster.on_create = _healthy_kubelet(run_s=1.5)  # the reaper makes several rounds meanwhile

    async def go():
        try:
            return await executor.run(trial, attempt=1)
        finally:
            await executor.aclose()

    assert asyncio.run(go()).outcome is Outcome.passed
    assert sorted(executor.reaped) == ["of-a-dead-owner", "of-an-owner-without-lease", "older-atoll-stale"]
    assert {"of-a-live-owner", "someone-else"} <= set(cluster.jobs)


def test_a_live_job_waiting_in_admission_is_not_reaped_by_another_worker(tmp_path, benchmark_dir, cluster):
    worker, other, trial = _two_workers(tmp_path, benchmark_dir, cluster, orphan_after_s=0.05, reap_s=0.05)
    healthy = _healthy_kubelet(run_s=1.5)

    def slow_to_schedule(standin, job):  # Pending for a second (a node scaling up), then runs
        later(1.0, lambda: healthy(standin, job))

    cluster.on_create = slow_to_schedule

    async def scenario():
        await other._ensure_started()  # another worker, reaping all the while
        try:
            return await worker.run(trial, attempt=1)
        finally:
            await worker.aclose()
            await other.aclose()

    assert asyncio.run(scenario()).outcome is Outcome.passed
    assert other.reaped == [] and len(cluster.created) == 1
    assert cluster.deleted == [cluster.created[0]["metadata"]["name"]]  # by its owner, once finished


def test_a_re_leased_trial_whose_worker_cannot_list_jobs_yet_starts_no_second_job(
    tmp_path, benchmark_dir, cluster
):
    # The new worker's watch has not listed the Jobs yet (the API fails its LISTs): an empty
    # cache must not read as "no live Job of this trial".
    old, new, trial = _two_workers(
        tmp_path, benchmark_dir, cluster, orphan_after_s=30, api_retry_budget_s=0.3, api_timeout_s=1
    )
    release = threading.Event()
    cluster.on_create = _kubelet_held_until(release)

    async def scenario():
        await _killed_mid_trial(old, trial, cluster)
        lists = cluster.fault("GET", r"/jobs$", status=503, times=None, watch=False)
        try:
            try:  # (bounded: a second Job would wait for the watch as long as the API fails)
                await asyncio.wait_for(new.run(trial, attempt=2), 20)
            except InfraError as exc:
                assert "cannot tell whether a Job of it is still running" in str(exc)
            except TimeoutError:
                pass
            else:
                raise AssertionError("the trial ran without knowing whether its Job was alive")
            assert len(cluster.created) == 1, "a second Job was started for the same trial"
            lists.times = 0  # the API answers again: the retried trial adopts the live Job
            adopting = asyncio.create_task(new.run(trial, attempt=3))
            await _until(lambda: new.adopted)
            release.set()
            return await adopting
        finally:
            await new.aclose()

    result = asyncio.run(scenario())
    assert result.outcome is Outcome.passed and result.attempt == 3
    assert len(cluster.created) == 1


def test_the_reaper_does_not_delete_a_job_adopted_after_it_listed_it(tmp_path, benchmark_dir, cluster):
    cluster.create_pods = False
    cluster.add_lease("atoll-worker-dead", holder="dead", renewed_s_ago=3600, duration_s=60)
    cluster.add_job(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "orphan-or-not", "labels": {**MANAGED, "atoll.dev/owner": "dead"}},
            "spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": []}}},
        }
    )
    reaper, _adopter, _trial = _two_workers(tmp_path, benchmark_dir, cluster, orphan_after_s=0.5)

    def adopt_meanwhile():  # another worker relabels the Job between the reaper's list and delete
        while stalled.times:  # until the reaper's DELETE has arrived (it is held for a second)
            time.sleep(0.01)
        with cluster.lock:
            job = cluster.jobs["orphan-or-not"]
            job["metadata"]["labels"]["atoll.dev/owner"] = "worker-b"
            cluster._record("Job", "MODIFIED", job)

    stalled = cluster.fault("DELETE", r"/jobs/orphan-or-not$", stall_s=1.0)
    later(0, adopt_meanwhile)
    assert asyncio.run(reaper.reap_orphans()) == []
    assert "orphan-or-not" in cluster.jobs, "the reaper deleted a Job adopted after it listed it"
    # Still an orphan when listed again (the adoption undone): then it is reaped.
    with cluster.lock:
        cluster.jobs["orphan-or-not"]["metadata"]["labels"]["atoll.dev/owner"] = "dead"
    assert asyncio.run(reaper.reap_orphans()) == ["orphan-or-not"]


def test_a_finished_job_whose_outcome_is_an_error_is_not_adopted_by_the_retry(
    tmp_path, benchmark_dir, cluster
):
    spec = _spec(tmp_path, benchmark_dir)
    benchmark = load_benchmark(spec.benchmark)
    [trial] = plan_trials(benchmark, spec)
    executor = KubernetesExecutor(benchmark, spec, _settings(cluster, owner="worker-a"))
    healthy = _healthy_kubelet(run_s=0.3)

    def on_create(standin, job):
        if len(standin.created) > 1:  # the retry's own Job runs fine
            return healthy(standin, job)
        name = job["metadata"]["name"]
        directory = base._input_uri(job).rsplit("/", 1)[0]

        def finish():
            outcome = PodTrialOutcome(infra_error="environment sidecar crashed")
            ArtifactStore(directory).put_bytes("outcome.json", outcome.model_dump_json().encode())
            standin.finish(name, succeeded=True)

        later(0.05, lambda: standin.set_pod(name, phase="Running"))
        later(0.3, finish)

    cluster.on_create = on_create
    cluster.fault("DELETE", r"/jobs/", status=403, times=1)  # the failed trial's Job stays (TTL)

    async def scenario():
        try:
            try:
                await executor.run(trial, attempt=1)
            except InfraError as exc:
                assert "environment sidecar crashed" in str(exc)
            else:
                raise AssertionError("the outcome's infra error was not raised")
            return await asyncio.wait_for(executor.run(trial, attempt=2), 20)  # the scheduler's retry
        finally:
            await executor.aclose()

    assert asyncio.run(scenario()).outcome is Outcome.passed
    assert executor.adopted == [] and len(cluster.created) == 2  # the retry ran a Job of its own


def _run_and_close(executor: KubernetesExecutor, trial) -> object:
    """Run attempt 1 of ``trial`` on ``executor`` and close it; the result."""

    async def scenario():
        try:
            return await executor.run(trial, attempt=1)
        finally:
            await executor.aclose()

    return asyncio.run(scenario())


def _theirs(manifest: dict, owner: str = "worker-a") -> dict:
    """The same attempt's Job as another worker creates it (its own owner label)."""
    job = copy.deepcopy(manifest)
    job["metadata"]["labels"]["atoll.dev/owner"] = owner
    return job


def test_a_job_another_worker_creates_just_before_the_create_is_adopted_not_duplicated(
    tmp_path, benchmark_dir, cluster
):
    """The adoption race: both workers looked, saw no Job, and the other's create lands
    first. The attempt's Job name is shared, so the API server answers 409 AlreadyExists and
    the trial adopts that Job instead of starting a second one."""
    first, second, trial = _two_workers(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _healthy_kubelet(run_s=0.2)
    create = second.cluster.create_job
    conflicts = []

    def racing_create(namespace, manifest):
        first.cluster.create_job(namespace, _theirs(manifest))  # the other worker's, a moment before
        second.cluster.create_job = create
        try:
            return create(namespace, manifest)
        except InfraError as exc:
            conflicts.append(exc)
            raise

    second.cluster.create_job = racing_create

    result = _run_and_close(second, trial)
    assert result.outcome is Outcome.passed
    [job] = cluster.created
    assert len(cluster.created) == 1, "a second Job was started for the same attempt"
    assert [exc.status for exc in conflicts] == [409]
    assert (
        second.adopted == [job["metadata"]["name"]]
        and job["metadata"]["labels"]["atoll.dev/owner"] == "worker-a"
    )
    assert not cluster.jobs and not second._unobserved and not second._following


def test_a_retried_create_that_meets_another_workers_job_adopts_it(tmp_path, benchmark_dir, cluster):
    """The create's connection is reset (nothing created) and, before the retry, another worker
    creates the attempt's Job under the shared name: the retry's 409 is not this worker's own
    Job, so it is adopted (followed, not owned) rather than counted as created."""
    from orchestrator.executors.kubernetes_api import ApiError

    first, second, trial = _two_workers(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _healthy_kubelet(run_s=0.2)
    create = second.cluster.create_job
    calls = []

    def reset_then_create(namespace, manifest):
        calls.append(manifest["metadata"]["name"])
        if len(calls) == 1:
            first.cluster.create_job(namespace, _theirs(manifest))  # lands while ours is lost
            raise ApiError("connection reset by peer", transient=True)
        return create(namespace, manifest)

    second.cluster.create_job = reset_then_create

    result = _run_and_close(second, trial)
    assert result.outcome is Outcome.passed
    assert len(calls) == 2 and len(cluster.created) == 1
    [job] = cluster.created
    assert job["metadata"]["labels"]["atoll.dev/owner"] == "worker-a"
    assert second.adopted == [job["metadata"]["name"]]


def test_a_job_started_by_another_worker_during_admission_is_found_by_the_second_check(
    tmp_path, benchmark_dir, cluster
):
    """Admission (and writing the input) can take minutes; a Job another worker started for
    the trial meanwhile — another attempt, so another name — is found by the check made right
    before the create, and adopted."""
    first, second, trial = _two_workers(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _healthy_kubelet(run_s=0.2)
    write_input = second._write_input

    async def slow_admission_then_write(spec, attempt):
        from orchestrator.executors.kubernetes_job import build_job

        input_uri, _pod_input = await first._write_input(spec, 1)
        theirs = build_job(first.template, spec, 1, input_uri, first.options)
        first.cluster.create_job(first.namespace, _theirs(theirs))
        return await write_input(spec, attempt)

    second._write_input = slow_admission_then_write

    async def scenario():
        try:
            return await second.run(trial, attempt=2)
        finally:
            await second.aclose()
            await first.aclose()

    result = asyncio.run(scenario())
    assert result.outcome is Outcome.passed and result.attempt == 2
    [job] = cluster.created
    assert job["metadata"]["labels"]["atoll.dev/attempt"] == "1" and second.adopted == [
        job["metadata"]["name"]
    ]
    assert not cluster.jobs and not second._unobserved


def test_a_failed_job_kept_under_the_attempts_name_gives_way_to_a_unique_name(
    tmp_path, benchmark_dir, cluster
):
    """A failed Job of the same attempt kept for inspection (ATOLL_K8S_KEEP_FAILED_JOBS) is not
    adopted: the attempt's Job is created under a unique name instead."""
    from orchestrator.executors.kubernetes_job import build_job, job_name

    first, second, trial = _two_workers(tmp_path, benchmark_dir, cluster)
    kept = build_job(
        first.template, trial, 1, "file:///nowhere/input.json", first.options, name=job_name(trial, 1)
    )
    first.cluster.create_job(first.namespace, _theirs(kept))
    cluster.finish(kept["metadata"]["name"], succeeded=False, reason="BackoffLimitExceeded", message="kept")
    cluster.on_create = _healthy_kubelet(run_s=0.2)

    async def scenario():
        try:
            return await second.run(trial, attempt=1)
        finally:
            await second.aclose()

    assert asyncio.run(scenario()).outcome is Outcome.passed
    names = [job["metadata"]["name"] for job in cluster.created]
    assert len(names) == 2 and names[0] == job_name(trial, 1) != names[1]
    assert names[1].startswith(f"atoll-{trial.trial_id[:12]}-1-") and second.adopted == []
    assert list(cluster.jobs) == [names[0]]  # the kept one stays; the new one was deleted when done
