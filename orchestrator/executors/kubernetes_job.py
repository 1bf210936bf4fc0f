"""Per-trial Jobs: built from the template in ``k8s/base/trial-job.yaml``, and read back.

Pure functions over plain manifests (dicts in the API's camelCase), so that what the
executor sends can be validated offline against the Kubernetes schemas and what it reads
can be tested without a cluster.
"""

from __future__ import annotations

import copy
import hashlib
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from atoll.errors import AtollError
from atoll.trial import TrialSpec

MANAGED_BY = "atoll-orchestrator"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_RUN = "atoll.dev/run"
LABEL_TRIAL = "atoll.dev/trial"
LABEL_ATTEMPT = "atoll.dev/attempt"
ANNOTATION_EXPERIMENT = "atoll.dev/experiment"
ANNOTATION_TRIAL_ID = "atoll.dev/trial-id"
ANNOTATION_INPUT = "atoll.dev/input"
ANNOTATION_HEARTBEAT = "atoll.dev/heartbeat"
TRIAL_CONTAINER = "trial"
ENVIRONMENT_CONTAINER = "environment"

# Waiting reasons that will not fix themselves by waiting longer than a grace period.
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


def run_label(experiment: str) -> str:
    """A label value for an experiment name: [a-z0-9-], ≤ 63 characters, stable and unique
    (a short hash of the full name is appended whenever the name had to change)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", experiment.lower()).strip("-")
    if cleaned == experiment and len(cleaned) <= 63:
        return cleaned
    digest = hashlib.sha256(experiment.encode()).hexdigest()[:8]
    return f"{cleaned[:50].strip('-') or 'run'}-{digest}"


def load_template(path: Path) -> dict[str, Any]:
    """The Job template; AtollError(bad_job_template) when unreadable or not a Job with a
    ``trial`` container and an ``environment`` sidecar."""
    try:
        template = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AtollError("bad_job_template", f"trial Job template {path}: no such file; set ATOLL_K8S_JOB_TEMPLATE "
                                             "(k8s/base/trial-job.yaml in the repository)") from None
    except (OSError, yaml.YAMLError) as exc:
        raise AtollError("bad_job_template", f"trial Job template {path}: {exc}") from None
    if not isinstance(template, dict) or template.get("kind") != "Job":
        raise AtollError("bad_job_template", f"trial Job template {path}: not a batch/v1 Job")
    pod = template.get("spec", {}).get("template", {}).get("spec", {})
    names = [c.get("name") for c in pod.get("containers", [])]
    sidecars = [c.get("name") for c in pod.get("initContainers", [])]
    if TRIAL_CONTAINER not in names or ENVIRONMENT_CONTAINER not in sidecars:
        raise AtollError("bad_job_template",
                         f"trial Job template {path}: needs a container 'trial' and an initContainer 'environment'")
    return template


@dataclass(frozen=True)
class JobOptions:
    namespace: str
    ttl_s: int = 600
    deadline_s: int = 3600
    trial_image: str | None = None
    environment_image: str | None = None
    runtime_class: str | None = None


def build_job(template: dict[str, Any], spec: TrialSpec, attempt: int, input_uri: str, options: JobOptions,
              *, now: float, name: str | None = None) -> dict[str, Any]:
    """The Job manifest of one trial attempt: the template with a unique name, the run and
    trial labels on the Job and its pod, the trial command, deadline and TTL."""
    job = copy.deepcopy(template)
    name = name or f"atoll-{spec.trial_id[:12]}-{attempt}-{secrets.token_hex(3)}"
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_RUN: run_label(spec.experiment),
        LABEL_TRIAL: spec.trial_id[:40],
        LABEL_ATTEMPT: str(attempt),
    }
    annotations = {
        ANNOTATION_EXPERIMENT: spec.experiment,
        ANNOTATION_TRIAL_ID: spec.trial_id,
        ANNOTATION_INPUT: input_uri,
        ANNOTATION_HEARTBEAT: str(int(now)),
    }
    metadata = job.setdefault("metadata", {})
    metadata["name"] = name
    metadata["namespace"] = options.namespace
    metadata.setdefault("labels", {}).update(labels)
    metadata.setdefault("annotations", {}).update(annotations)
    job_spec = job["spec"]
    job_spec["backoffLimit"] = 0  # the orchestrator retries infra errors itself, with history
    job_spec["ttlSecondsAfterFinished"] = options.ttl_s
    job_spec["activeDeadlineSeconds"] = options.deadline_s
    pod_template = job_spec["template"]
    pod_meta = pod_template.setdefault("metadata", {})
    pod_meta.setdefault("labels", {}).update(labels)
    pod_meta.setdefault("annotations", {}).update({ANNOTATION_TRIAL_ID: spec.trial_id})
    pod = pod_template["spec"]
    if options.runtime_class:
        pod["runtimeClassName"] = options.runtime_class
    for container in pod["containers"]:
        if container["name"] == TRIAL_CONTAINER:
            container["args"] = ["atoll", "trial", "run", "--input", input_uri]
            if options.trial_image:
                container["image"] = options.trial_image
    for container in pod["initContainers"]:
        if container["name"] == ENVIRONMENT_CONTAINER and options.environment_image:
            container["image"] = options.environment_image
        if container["name"] == ENVIRONMENT_CONTAINER and options.runtime_class:
            # Inside gVisor/Kata the pod is the sandbox: code_exec runs without bubblewrap,
            # which needed the Unconfined seccomp and AppArmor profiles; the defaults are enough.
            security = container.setdefault("securityContext", {})
            security["seccompProfile"] = {"type": "RuntimeDefault"}
            security["appArmorProfile"] = {"type": "RuntimeDefault"}
            env = container.setdefault("env", [])
            env[:] = [item for item in env if item.get("name") != "ATOLL_CODE_TRUST_OUTER_SANDBOX"]
            env.append({"name": "ATOLL_CODE_TRUST_OUTER_SANDBOX", "value": "1"})
    return job


@dataclass(frozen=True)
class JobState:
    """What a Job and its pod say: ``phase`` is pending | running | succeeded | failed;
    ``reason`` names the cause of a failure (or of a stuck pending pod) for people."""

    phase: str
    reason: str = ""
    stuck_kind: str = ""  # waiting on something that may never resolve: image_pull | unschedulable | config


def _condition(conditions: list[dict[str, Any]] | None, kind: str) -> dict[str, Any] | None:
    for condition in conditions or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _container_failure(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    statuses += (pod.get("status") or {}).get("initContainerStatuses") or []
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
        if terminated and terminated.get("reason") == "OOMKilled":
            return f"container {status.get('name')} OOMKilled (exit {terminated.get('exitCode')})"
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            message = (terminated.get("message") or "").strip()[:300]
            return (f"container {status.get('name')} exited {terminated.get('exitCode')} "
                    f"({terminated.get('reason') or 'Error'}){': ' + message if message else ''}")
    return ""


def read_state(job: dict[str, Any], pods: list[dict[str, Any]]) -> JobState:
    """Interpret a Job and its pods (API dicts). Never raises on missing fields."""
    status = job.get("status") or {}
    conditions = status.get("conditions")
    if status.get("succeeded") or _condition(conditions, "Complete"):
        return JobState("succeeded")
    failed = _condition(conditions, "Failed")
    if failed or status.get("failed"):
        failure = next((text for pod in pods if (text := _container_failure(pod))), "")
        reason = (failed or {}).get("reason") or "Failed"
        message = (failed or {}).get("message") or ""
        if reason == "DeadlineExceeded":
            return JobState("failed", f"DeadlineExceeded: trial pod ran past activeDeadlineSeconds "
                                      f"{job.get('spec', {}).get('activeDeadlineSeconds')}"
                                      + (f"; {failure}" if failure else ""))
        return JobState("failed", failure or f"{reason}: {message}".strip(": "))
    for pod in pods:
        pod_status = pod.get("status") or {}
        for container in (pod_status.get("containerStatuses") or []) + (pod_status.get("initContainerStatuses") or []):
            waiting = (container.get("state") or {}).get("waiting") or {}
            why = waiting.get("reason")
            if why in IMAGE_PULL_REASONS or why in CONFIG_REASONS:
                kind = "image_pull" if why in IMAGE_PULL_REASONS else "config"
                return JobState("pending", f"{why}: container {container.get('name')}: "
                                           f"{(waiting.get('message') or '').strip()[:300]}".rstrip(": "),
                                kind)
        scheduled = next((c for c in pod_status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return JobState("pending", f"Unschedulable: {(scheduled.get('message') or '').strip()[:300]}",
                            "unschedulable")
        if pod_status.get("phase") == "Running":
            return JobState("running")
        if pod_status.get("phase") == "Failed":
            return JobState("failed", _container_failure(pod) or pod_status.get("reason") or "pod failed")
    return JobState("pending")


__all__ = ["JobOptions", "JobState", "build_job", "load_template", "read_state", "run_label"]
