"""What a trial Job, its pod and their Events say, read the way Kubernetes means them.

Pure functions over API dicts (camelCase), so that each reading is tested without a cluster.
Failures name their real cause: an evicted or preempted pod is a disruption, not the exit
code its killed containers report; a Job that failed because its pod was deleted says so; an
environment sidecar that crash-loops or restarted while the trial ran fails the trial as an
infrastructure error (its world is gone) even when the trial container exited 0; a pod that
cannot be created (FailedCreate) or started (FailedMount, sandbox errors) is reported with
the Event's message instead of "pending". A pod disrupted (DisruptionTarget) under a Job whose
``podFailurePolicy`` ignores disruptions is not a failure: the Job makes another pod, and the
trial waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.executors.kubernetes_job import ENVIRONMENT_CONTAINER, TRIAL_CONTAINER

# Waiting reasons that will not fix themselves by waiting longer than a grace period.
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
BAD_IMAGE_REASONS = frozenset({"InvalidImageName", "ErrImageNeverPull"})  # no retry can fix these
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
# Events on a pending pod that say it cannot start, and on a Job that it cannot make its pod.
POD_START_EVENTS = frozenset({"FailedMount", "FailedAttachVolume", "FailedCreatePodSandBox"})
JOB_CREATE_EVENTS = frozenset({"FailedCreate"})
# Pod-level reasons (status.reason) of a pod the node or the control plane took away.
DISRUPTION_REASONS = frozenset(
    {
        "Evicted",
        "Preempting",
        "NodeLost",
        "Shutdown",
        "NodeShutdown",
        "Terminated",
        "UnexpectedAdmissionError",
    }
)


@dataclass(frozen=True)
class JobState:
    """``phase`` is pending | running | succeeded | failed; ``reason`` names the cause of a
    failure (or of a stuck pending pod) for people."""

    phase: str
    reason: str = ""
    # waiting on something that may never resolve: image_pull | unschedulable | start |
    # finishing (a failed pod whose Job is not marked failed yet)
    stuck_kind: str = ""


def _condition(conditions: list[dict[str, Any]] | None, kind: str) -> dict[str, Any] | None:
    for condition in conditions or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])


def _short(text: str | None) -> str:
    return (text or "").strip()[:300]


def _exit(terminated: dict[str, Any]) -> str:
    return f"{terminated.get('reason') or 'Error'}, exit {terminated.get('exitCode')}"


def _container_failure(pod: dict[str, Any]) -> str:
    statuses = _statuses(pod)
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get(
            "terminated"
        )
        if terminated and terminated.get("reason") == "OOMKilled":
            return f"container {status.get('name')} OOMKilled (exit {terminated.get('exitCode')})"
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            message = _short(terminated.get("message"))
            return (
                f"container {status.get('name')} exited {terminated.get('exitCode')} "
                f"({terminated.get('reason') or 'Error'}){': ' + message if message else ''}"
            )
    return ""


def disruption(pod: dict[str, Any]) -> str:
    """Why the node or control plane took the pod away (eviction, preemption, drain, node
    loss), or "" — the containers' exit codes (137) then say nothing about the trial."""
    status = pod.get("status") or {}
    target = _condition(status.get("conditions"), "DisruptionTarget")
    if target:
        return f"pod disrupted ({target.get('reason') or 'DisruptionTarget'})" + (
            f": {_short(target.get('message'))}" if target.get("message") else ""
        )
    if status.get("reason") in DISRUPTION_REASONS:
        return f"pod {status['reason'].lower()}" + (
            f": {_short(status.get('message'))}" if status.get("message") else ""
        )
    return ""


def environment_restart(pod: dict[str, Any]) -> str:
    """The environment sidecar restarted after the trial container started: the world the
    agent worked in is gone, so the trial's result means nothing."""
    statuses = {status.get("name"): status for status in _statuses(pod)}
    environment, trial = statuses.get(ENVIRONMENT_CONTAINER), statuses.get(TRIAL_CONTAINER)
    if not environment or not environment.get("restartCount") or not trial:
        return ""
    trial_state = trial.get("state") or {}
    trial_started = (trial_state.get("running") or trial_state.get("terminated") or {}).get("startedAt")
    if not trial_started and not trial_state.get("terminated"):
        return ""  # a restart before the trial began costs nothing: the trial waits for health
    last = (environment.get("lastState") or {}).get("terminated") or {}
    finished = last.get("finishedAt")
    # RFC 3339 UTC timestamps of one format compare as strings; a same-second restart counts.
    if trial_started and finished and finished < trial_started:
        return ""
    return (
        f"environment sidecar restarted during the trial ({environment['restartCount']} "
        f"restart{'s' if environment['restartCount'] != 1 else ''}"
        + (f"; last: {_exit(last)}" if last else "")
        + ")"
    )


def _waiting(pod: dict[str, Any]) -> JobState | None:
    for container in _statuses(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        why, name, message = waiting.get("reason"), container.get("name"), _short(waiting.get("message"))
        if why == "CrashLoopBackOff":
            last = (container.get("lastState") or {}).get("terminated")
            return JobState(
                "failed",
                f"CrashLoopBackOff: container {name} keeps crashing"
                + (f" (last: {_exit(last)})" if last else "")
                + (f": {message}" if message else ""),
            )
        if why in BAD_IMAGE_REASONS:
            return JobState("failed", f"{why}: container {name}: {message}".rstrip(": "))
        if why in IMAGE_PULL_REASONS or why in CONFIG_REASONS:
            kind = "image_pull" if why in IMAGE_PULL_REASONS else "start"
            return JobState("pending", f"{why}: container {name}: {message}".rstrip(": "), kind)
    return None


def _warning(events: list[dict[str, Any]], name: str, reasons: frozenset[str]) -> dict[str, Any] | None:
    found = [
        event
        for event in events
        if (event.get("involvedObject") or {}).get("name") == name and event.get("reason") in reasons
    ]
    return max(found, key=lambda event: event.get("lastTimestamp") or "", default=None)


def ignores_disruptions(job: dict[str, Any]) -> bool:
    """Whether the Job's podFailurePolicy replaces a disrupted pod instead of failing."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    return any(
        rule.get("action") == "Ignore"
        and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
        for rule in rules
    )


def is_terminal(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    conditions = status.get("conditions")
    return bool(
        status.get("succeeded")
        or status.get("failed")
        or _condition(conditions, "Complete")
        or _condition(conditions, "Failed")
    )


def read_state(
    job: dict[str, Any], pods: list[dict[str, Any]], events: list[dict[str, Any]] | None = None
) -> JobState:
    """Interpret a Job, its pods and Events (API dicts). Never raises on missing fields."""
    events = events or []
    status = job.get("status") or {}
    conditions = status.get("conditions")
    failed = _condition(conditions, "Failed")
    replaced = ""
    if ignores_disruptions(job):
        # Disrupted pods are being replaced by the Job: read the others (or wait for one). They
        # never fail the Job either: a Job failed after one was replaced failed for another pod.
        gone = [
            pod for pod in pods if _condition((pod.get("status") or {}).get("conditions"), "DisruptionTarget")
        ]
        if gone:
            replaced = disruption(gone[0])
            pods = [pod for pod in pods if pod not in gone]
    restarted = next((text for pod in pods if (text := environment_restart(pod))), "")
    if status.get("succeeded") or _condition(conditions, "Complete"):
        return JobState("failed", restarted) if restarted else JobState("succeeded")
    disrupted = next((text for pod in pods if (text := disruption(pod))), "")
    if failed or status.get("failed"):
        reason = (failed or {}).get("reason") or "Failed"
        message = (failed or {}).get("message") or ""
        if disrupted or restarted:
            return JobState("failed", disrupted or restarted)
        failure = next((text for pod in pods if (text := _container_failure(pod))), "")
        timed_out = next(
            (pod for pod in pods if (pod.get("status") or {}).get("reason") == "DeadlineExceeded"), None
        )
        if timed_out is not None:  # the pod's own deadline: the trial's run time
            seconds = (timed_out.get("spec") or {}).get("activeDeadlineSeconds")
            return JobState(
                "failed",
                "DeadlineExceeded: the trial ran past the pod's activeDeadlineSeconds"
                + (f" {seconds}" if seconds else "")
                + " (limits.timeout_s + deadline_grace_s)",
            )
        if reason == "DeadlineExceeded":
            return JobState(
                "failed",
                f"DeadlineExceeded: trial Job ran past activeDeadlineSeconds "
                f"{job.get('spec', {}).get('activeDeadlineSeconds')} (scheduling, start "
                f"and run time)" + (f"; {failure}" if failure else ""),
            )
        if not failure and (
            not pods or any((pod.get("metadata") or {}).get("deletionTimestamp") for pod in pods)
        ):
            return JobState(
                "failed",
                f"trial pod was deleted before it finished (drain, preemption or node loss; "
                f"the Job reports {reason})",
            )
        return JobState("failed", failure or f"{reason}: {message}".strip(": "))
    if disrupted or restarted:  # with backoffLimit 0 the Job fails next; no need to wait for it
        return JobState("failed", disrupted or restarted)
    if not pods:
        event = _warning(events, (job.get("metadata") or {}).get("name") or "", JOB_CREATE_EVENTS)
        if event:
            return JobState("pending", f"{event.get('reason')}: {_short(event.get('message'))}", "start")
        if replaced:
            return JobState("pending", f"{replaced}; waiting for the Job's replacement pod", "start")
        return JobState("pending", "no pod created for the Job yet", "start")
    for pod in pods:
        pod_status = pod.get("status") or {}
        if stuck := _waiting(pod):
            return stuck
        scheduled = next(
            (c for c in pod_status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return JobState("pending", f"Unschedulable: {_short(scheduled.get('message'))}", "unschedulable")
        if pod_status.get("phase") == "Running":
            return JobState("running")
        if pod_status.get("phase") == "Failed":
            # The Job controller marks the Job failed next (its condition carries the reason
            # that matters: a deadline, the failure policy): wait for it, a little.
            return JobState(
                "pending", _container_failure(pod) or pod_status.get("reason") or "pod failed", "finishing"
            )
        event = _warning(events, (pod.get("metadata") or {}).get("name") or "", POD_START_EVENTS)
        if event:
            return JobState("pending", f"{event.get('reason')}: {_short(event.get('message'))}", "start")
    return JobState("pending")


def needs_events(state: JobState) -> bool:
    """Whether Events could explain this state better (a pending pod not yet explained)."""
    return state.phase == "pending" and state.stuck_kind in ("", "start")


__all__ = [
    "JobState",
    "disruption",
    "environment_restart",
    "ignores_disruptions",
    "is_terminal",
    "needs_events",
    "read_state",
]
