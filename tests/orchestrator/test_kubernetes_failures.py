"""Failure reasons of the Kubernetes executor as a cluster really reports them: evictions and
preemptions, pods deleted by a drain, a crash-looping environment sidecar, pods that cannot
mount or cannot be created (Events), an environment that restarted mid-trial. Through the
real ``kubernetes`` client over HTTP to the stand-in (no cluster is available here)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import pytest

from atoll.trajectory import RunStatus, Trajectory
from atoll.trial import Outcome, TrialResult
from orchestrator.artifacts import ArtifactStore, read_artifact
from orchestrator.executors.base import InfraError, attached_result
from orchestrator.executors.kubernetes_state import environment_restart
from orchestrator.executors.kubernetes_trial import PodTrialOutcome
from tests.deploy.kube_standin import container_status, later
from tests.orchestrator import test_kubernetes_executor as base
from tests.orchestrator.test_kubernetes_api import _healthy_kubelet
from tests.orchestrator.test_kubernetes_executor import _executor

benchmark_dir, cluster = base.benchmark_dir, base.cluster  # the same fixtures


def _run_within(executor, trial, seconds: float = 10.0):
    """Run one trial, failing the test if it is still "pending" after ``seconds``."""

    async def go():
        try:
            return await asyncio.wait_for(executor.run(trial, attempt=1), seconds)
        finally:
            await executor.aclose()

    return asyncio.run(go())


def _after(delay_s, scenario):
    def on_create(standin, job):
        later(delay_s, lambda: scenario(standin, job["metadata"]["name"]))

    return on_create


def test_an_evicted_pod_is_an_infra_error_naming_the_eviction(tmp_path, benchmark_dir, cluster):
    def evict(standin, name):
        standin.set_pod(
            name,
            phase="Failed",
            reason="Evicted",
            message="The node was low on resource: memory. Threshold quantity: 100Mi.",
            containers=[container_status("trial", terminated=(137, "ContainerStatusUnknown"))],
        )
        standin.finish(name, succeeded=False, reason="BackoffLimitExceeded")

    cluster.on_create = _after(0.1, evict)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(InfraError, match=r"pod evicted: The node was low on resource: memory") as caught:
        _run_within(executor, trial)
    assert "137" not in str(caught.value)


def test_a_disrupted_pod_is_replaced_and_the_trial_ends_in_the_new_pod_without_a_retry(
    tmp_path, benchmark_dir, cluster
):
    healthy = _healthy_kubelet(run_s=0.4)

    def on_create(standin, job):
        name = job["metadata"]["name"]

        def preempt():  # the scheduler preempts the pod; podFailurePolicy Ignore: a new pod
            standin.set_pod(
                name,
                phase="Failed",
                conditions=[
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "Preempted in order to admit critical pod",
                    }
                ],
                containers=[container_status("trial", terminated=(137, "Error"))],
            )
            later(0.2, lambda: (standin.replace_pod(name), healthy(standin, job)))

        standin.set_pod(name, phase="Running")
        later(0.2, preempt)

    cluster.on_create = on_create
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    result = _run_within(executor, trial)
    assert result.outcome is Outcome.passed and result.attempt == 1
    [job] = cluster.created
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in job[
        "spec"
    ]["podFailurePolicy"]["rules"]
    assert len(cluster.retired) == 0 and not cluster.jobs  # both pods went with the Job


def test_without_a_failure_policy_a_disrupted_pod_fails_fast_with_the_disruption():
    from orchestrator.executors.kubernetes_state import read_state

    pod = {
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "drain",
                }
            ],
        }
    }
    state = read_state({"spec": {}, "status": {}}, [pod])
    assert (state.phase, state.reason) == ("failed", "pod disrupted (EvictionByEvictionAPI): drain")
    ignoring = {
        "spec": {
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            }
        },
        "status": {},
    }
    waiting = read_state(ignoring, [pod])
    assert waiting.phase == "pending" and "waiting for the Job's replacement pod" in waiting.reason


def test_a_job_failed_after_its_evicted_pod_was_replaced_names_the_replacement_s_end():
    """Under podFailurePolicy Ignore an evicted pod never fails its Job: a Job failed after
    one was replaced failed for its replacement (deleted here), not for the eviction."""
    from orchestrator.executors.kubernetes_state import read_state

    evicted = {
        "status": {
            "phase": "Failed",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}],
        }
    }
    job = {
        "spec": {
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            }
        },
        "status": {
            "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        },
    }
    state = read_state(job, [evicted])  # the replacement pod is gone (deleted)
    assert state.phase == "failed" and state.reason.startswith("trial pod was deleted before it finished")


def test_a_job_failed_because_its_pod_was_deleted_says_so(tmp_path, benchmark_dir, cluster):
    def drain(standin, name):
        standin.set_pod(name, phase="Running")
        later(0.2, lambda: (standin.delete_pod(name), standin.finish(name, succeeded=False)))

    cluster.on_create = _after(0.05, drain)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError,
        match=r"trial pod was deleted before it finished \(drain, preemption or node loss; "
        r"the Job reports BackoffLimitExceeded\)",
    ):
        _run_within(executor, trial)


def test_a_crash_looping_environment_sidecar_fails_the_trial_at_once(tmp_path, benchmark_dir, cluster):
    cluster.on_create = _after(
        0.1,
        lambda standin, name: standin.set_pod(
            name,
            sidecars=[
                container_status(
                    "environment",
                    waiting="CrashLoopBackOff",
                    message="back-off 40s restarting failed container=environment",
                    restart_count=3,
                    last_terminated=(1, "Error"),
                )
            ],
            containers=[container_status("trial", waiting="PodInitializing")],
        ),
    )
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError,
        match=r"CrashLoopBackOff: container environment keeps crashing "
        r"\(last: Error, exit 1\): back-off 40s",
    ):
        _run_within(executor, trial)
    assert not cluster.jobs


def test_a_pod_that_cannot_mount_fails_with_the_event_after_the_start_timeout(
    tmp_path, benchmark_dir, cluster
):
    message = 'MountVolume.SetUp failed for volume "store" : secret "atoll-artifact-store" not found'

    def stuck(standin, name):
        standin.set_pod(name, containers=[container_status("trial", waiting="ContainerCreating")])
        standin.add_event(f"{name}-pod", "FailedMount", message, kind="Pod")

    cluster.on_create = _after(0.05, stuck)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, start_timeout_s=0.3)
    with pytest.raises(
        InfraError, match=r'FailedMount: MountVolume.SetUp failed for volume "store" : secret'
    ):
        _run_within(executor, trial)
    assert not cluster.jobs


def test_a_job_whose_pod_is_never_created_fails_with_the_failed_create_event(
    tmp_path, benchmark_dir, cluster
):
    message = (
        'Error creating: pods "x" is forbidden: violates PodSecurity "restricted:latest": '
        "runAsNonRoot != true"
    )
    cluster.create_pods = False
    cluster.on_create = _after(0.05, lambda standin, name: standin.add_event(name, "FailedCreate", message))
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, start_timeout_s=0.3)
    with pytest.raises(
        InfraError, match=r'FailedCreate: Error creating: pods "x" is forbidden: violates PodSecurity'
    ):
        _run_within(executor, trial)
    assert not cluster.jobs


def test_an_invalid_image_fails_without_waiting_for_the_pull_grace(tmp_path, benchmark_dir, cluster):
    cluster.on_create = _after(
        0.05,
        lambda standin, name: standin.set_pod(
            name,
            sidecars=[
                container_status(
                    "environment",
                    waiting="InvalidImageName",
                    message='Failed to apply default image tag "atoll:Bad:tag"',
                )
            ],
        ),
    )
    executor, trial = _executor(tmp_path, benchmark_dir, cluster, image_pull_timeout_s=60)
    started = time.monotonic()
    with pytest.raises(InfraError, match=r"InvalidImageName: container environment: Failed to apply"):
        _run_within(executor, trial)
    assert time.monotonic() - started < 5


def test_an_environment_restarted_during_the_trial_is_an_infra_error_not_a_result(
    tmp_path, benchmark_dir, cluster
):
    healthy = _healthy_kubelet(run_s=0.4)

    def on_create(standin, job):
        name = job["metadata"]["name"]
        healthy(standin, job)
        trial_started = "2026-01-01T10:00:00Z"
        later(
            0.15,
            lambda: standin.set_pod(
                name,
                containers=[
                    {
                        **container_status("trial", running=True),
                        "state": {"running": {"startedAt": trial_started}},
                    }
                ],
                sidecars=[
                    container_status(
                        "environment",
                        running=True,
                        restart_count=1,
                        last_terminated=(137, "OOMKilled"),
                        finished_at="2026-01-01T10:05:00Z",
                    )
                ],
            ),
        )

    cluster.on_create = on_create
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError,
        match=r"environment sidecar restarted during the trial \(1 restart; "
        r"last: OOMKilled, exit 137\)",
    ):
        _run_within(executor, trial)


def test_an_environment_restart_before_the_trial_started_costs_nothing():
    def pod(trial_started: str | None) -> dict:
        trial = container_status("trial", waiting="PodInitializing")
        if trial_started:
            trial["state"] = {"running": {"startedAt": trial_started}}
        environment = container_status(
            "environment",
            running=True,
            restart_count=1,
            last_terminated=(1, "Error"),
            finished_at="2026-01-01T10:00:00Z",
        )
        return {"status": {"containerStatuses": [trial], "initContainerStatuses": [environment]}}

    assert environment_restart(pod(None)) == ""
    assert environment_restart(pod("2026-01-01T10:00:30Z")) == ""  # restarted, then the trial began
    assert environment_restart(pod("2026-01-01T09:59:00Z")).startswith("environment sidecar restarted")


def test_a_node_that_cannot_host_the_sandbox_fails_the_pod_at_once_saying_why(
    tmp_path, benchmark_dir, cluster
):
    reason = (
        "code_exec sandbox unavailable: bubblewrap cannot create a user namespace: Operation not permitted"
    )

    def refused(standin, name):
        standin.set_pod(
            name,
            phase="Failed",
            sidecars=[container_status("sandbox-check", terminated=(3, "Error"), message=reason)],
        )
        standin.finish(name, succeeded=False, reason="BackoffLimitExceeded")

    cluster.on_create = _after(0.05, refused)
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    with pytest.raises(
        InfraError,
        match=r"container sandbox-check exited 3 \(Error\): code_exec sandbox unavailable: "
        r"bubblewrap cannot create a user namespace",
    ):
        _run_within(executor, trial)
    init = cluster.created[0]["spec"]["template"]["spec"]["initContainers"]
    assert [container["name"] for container in init] == [
        "sandbox-check",
        "environment",
    ]  # the check comes first


def test_the_sandbox_self_test_exits_3_with_the_reason_when_no_sandbox_can_be_built(tmp_path):
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "atoll_cli", "env", "sandbox-check"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ATOLL_CODE_BWRAP_PATH": "/nonexistent/bwrap"},
    )
    assert result.returncode == 3
    assert result.stderr.strip().startswith("code_exec sandbox unavailable: bubblewrap not found")


def _deleted_by_another_follower(*, outcome: bool):
    """on_create: the pod runs, (maybe) writes its outcome, and the Job is deleted before this
    worker's watch shows it succeeded — as another worker following the same Job (it adopted
    the trial while this one's store lease had expired) does when it finishes first."""

    def on_create(standin, job):
        name = job["metadata"]["name"]

        def finish_and_delete():
            if outcome:
                directory = base._input_uri(job).rsplit("/", 1)[0]
                trial_id = job["metadata"]["annotations"]["atoll.dev/trial-id"]
                result = TrialResult(trial_id=trial_id, outcome=Outcome.passed, score=1.0)
                ArtifactStore(directory).put_bytes(
                    "outcome.json", PodTrialOutcome(result=result).model_dump_json().encode()
                )
            with standin.lock:
                standin._record("Job", "DELETED", standin.jobs.pop(name))
                if (pod := standin.pods.pop(name, None)) is not None:
                    standin._record("Pod", "DELETED", pod)

        later(0.05, lambda: standin.set_pod(name, phase="Running"))
        later(0.5, finish_and_delete)

    return on_create


def test_a_job_deleted_by_another_follower_after_it_finished_gives_its_outcome(
    tmp_path, benchmark_dir, cluster
):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _deleted_by_another_follower(outcome=True)
    assert _run_within(executor, trial).outcome is Outcome.passed


def test_a_job_deleted_before_it_left_an_outcome_is_an_infra_error(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    cluster.on_create = _deleted_by_another_follower(outcome=False)
    with pytest.raises(
        InfraError, match=r"disappeared \(deleted outside atoll\) and left no readable outcome"
    ) as caught:
        _run_within(executor, trial)
    assert attached_result(caught.value) is None  # no trajectory so far was written: nothing kept


def test_a_pod_deleted_mid_trial_leaves_the_trajectory_it_wrote_so_far(tmp_path, benchmark_dir, cluster):
    executor, trial = _executor(tmp_path, benchmark_dir, cluster)
    deleted = _deleted_by_another_follower(outcome=False)

    def on_create(standin, job):
        # What the pod's agent wrote as it went, two steps in.
        directory = base._input_uri(job).rsplit("/", 1)[0]
        now = datetime.now(UTC)
        so_far = Trajectory(
            trial_id=trial.trial_id,
            agent="react_toolbelt",
            model="m",
            status=RunStatus.running,
            steps=2,
            messages=[{"role": "user", "content": "the prompt"}],
            started_at=now,
            ended_at=now,
        )
        ArtifactStore(directory).put_bytes("trajectory.json", so_far.model_dump_json().encode())
        deleted(standin, job)

    cluster.on_create = on_create
    with pytest.raises(InfraError, match=r"disappeared") as caught:
        _run_within(executor, trial)
    evidence = attached_result(caught.value)
    assert evidence is not None and evidence.outcome is Outcome.infra_error and evidence.steps == 2
    assert evidence.duration_s > 0 and "disappeared" in evidence.error
    kept = json.loads(read_artifact(evidence.trajectory_uri))
    assert kept["status"] == "error" and kept["error"]["kind"] == "infrastructure"
    assert kept["messages"] == [{"role": "user", "content": "the prompt"}]
