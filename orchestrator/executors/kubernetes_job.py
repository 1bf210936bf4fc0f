"""Per-trial Jobs: built from the template in ``k8s/base/trial-job.yaml`` (read back by
:mod:`kubernetes_state`).

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

from atoll.errors import AtollError, ErrorCode
from atoll.trial import TrialSpec

MANAGED_BY = "atoll-orchestrator"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_RUN = "atoll.dev/run"
LABEL_TRIAL = "atoll.dev/trial"
LABEL_ATTEMPT = "atoll.dev/attempt"
ANNOTATION_EXPERIMENT = "atoll.dev/experiment"
ANNOTATION_TRIAL_ID = "atoll.dev/trial-id"
ANNOTATION_INPUT = "atoll.dev/input"
ANNOTATION_HEARTBEAT = "atoll.dev/heartbeat"  # Jobs of atoll before owner Leases: reaped by its age
ANNOTATION_CREATED = "atoll.dev/created-at"  # stamped when the Job is created (or adopted)
LABEL_OWNER = "atoll.dev/owner"  # the executor whose Lease keeps the Job alive
# The exit codes of `atoll trial run` itself (2: a bad input, 1: a crash): another pod would
# fail the same way, so the Job fails at once. Infrastructure failures it can name are in
# outcome.json with exit 0; a disrupted pod (eviction, preemption, drain) is replaced.
TRIAL_EXIT_CODES = [1, 2]
TRIAL_CONTAINER = "trial"
ENVIRONMENT_CONTAINER = "environment"
SANDBOX_CHECK_CONTAINER = "sandbox-check"  # optional init container: the sandbox's start-up self-test


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
        raise AtollError(
            ErrorCode.bad_job_template,
            f"trial Job template {path}: no such file; set ATOLL_K8S_JOB_TEMPLATE "
            "(k8s/base/trial-job.yaml in the repository)",
        ) from None
    except (OSError, yaml.YAMLError) as exc:
        raise AtollError(ErrorCode.bad_job_template, f"trial Job template {path}: {exc}") from None
    if not isinstance(template, dict) or template.get("kind") != "Job":
        raise AtollError(ErrorCode.bad_job_template, f"trial Job template {path}: not a batch/v1 Job")
    pod = template.get("spec", {}).get("template", {}).get("spec", {})
    names = [c.get("name") for c in pod.get("containers", [])]
    sidecars = [c.get("name") for c in pod.get("initContainers", [])]
    if TRIAL_CONTAINER not in names or ENVIRONMENT_CONTAINER not in sidecars:
        raise AtollError(
            ErrorCode.bad_job_template,
            f"trial Job template {path}: needs a container 'trial' and an initContainer 'environment'",
        )
    return template


@dataclass(frozen=True)
class JobOptions:
    namespace: str
    ttl_s: int = 600
    deadline_s: int = 3600
    trial_image: str | None = None
    environment_image: str | None = None
    runtime_class: str | None = None
    priority_class: str | None = None
    # Seconds the pod may take to be scheduled and started before the Job-level deadline
    # (a backstop; the executor's own unschedulable/start/image timeouts fire first).
    schedule_s: int = 1800
    #: variables set on the environment sidecar (the experiment's coworker: block, its seed)
    environment_env: tuple[tuple[str, str], ...] = ()


def job_name(spec: TrialSpec, attempt: int, *, unique: bool = False) -> str:
    """The Job name of one attempt of a trial: the same for every worker (a hash of trial id
    and attempt), so that two workers racing to start the same attempt meet at the API
    server (409 AlreadyExists) instead of starting two Jobs; ``unique`` (a random suffix)
    for when that name is held by a finished Job of the attempt."""
    suffix = (
        secrets.token_hex(3)
        if unique
        else hashlib.sha256(f"{spec.trial_id}/{attempt}".encode()).hexdigest()[:6]
    )
    return f"atoll-{spec.trial_id[:12]}-{attempt}-{suffix}"


def build_job(
    template: dict[str, Any],
    spec: TrialSpec,
    attempt: int,
    input_uri: str,
    options: JobOptions,
    *,
    name: str | None = None,
    pod_input: str | None = None,
) -> dict[str, Any]:
    """The Job manifest of one trial attempt: the template with a unique name, the run and
    trial labels on the Job and its pod, the trial command, deadlines, failure policy and
    TTL. The owner label and creation stamp are the executor's, added when it creates it.

    ``input_uri`` (the store's URI of the input, annotated: where the executor finds the
    outcome) is what the pod reads unless ``pod_input`` (a presigned URL of it) is given.

    Two deadlines: the pod's ``activeDeadlineSeconds`` bounds the trial's run time (counted
    from the pod's start on its node); the Job's adds ``schedule_s`` for scheduling, so a
    pod waiting for a node is never cut by the run-time deadline."""
    job = copy.deepcopy(template)
    name = name or job_name(spec, attempt)
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
    }
    metadata = job.setdefault("metadata", {})
    metadata["name"] = name
    metadata["namespace"] = options.namespace
    metadata.setdefault("labels", {}).update(labels)
    metadata.setdefault("annotations", {}).update(annotations)
    job_spec = job["spec"]
    job_spec["backoffLimit"] = 0  # the orchestrator retries infra errors itself, with history
    job_spec["ttlSecondsAfterFinished"] = options.ttl_s
    job_spec["activeDeadlineSeconds"] = options.deadline_s + options.schedule_s
    job_spec["podFailurePolicy"] = {
        "rules": [
            # Evicted, preempted, drained, node lost: not the trial's doing; the Job makes a new pod
            # without spending backoffLimit (nor a retry of the store).
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": TRIAL_CONTAINER,
                    "operator": "In",
                    "values": TRIAL_EXIT_CODES,
                },
            },
        ]
    }
    pod_template = job_spec["template"]
    pod_meta = pod_template.setdefault("metadata", {})
    pod_meta.setdefault("labels", {}).update(labels)
    pod_meta.setdefault("annotations", {}).update(
        {
            ANNOTATION_TRIAL_ID: spec.trial_id,
            # A running trial costs model money; moving it loses that work. Autoscalers keep it.
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
            "karpenter.sh/do-not-disrupt": "true",
        }
    )
    pod = pod_template["spec"]
    pod["activeDeadlineSeconds"] = options.deadline_s
    if options.runtime_class:
        pod["runtimeClassName"] = options.runtime_class
        # The pod is the sandbox: no user namespace of its own is needed (nor supported by
        # every sandboxing runtime), and without one an unmasked /proc is not allowed.
        pod.pop("hostUsers", None)
    if options.priority_class:
        pod["priorityClassName"] = options.priority_class
    for container in pod["containers"]:
        if container["name"] == TRIAL_CONTAINER:
            container["args"] = ["atoll", "trial", "run", "--input", pod_input or input_uri]
            if options.trial_image:
                container["image"] = options.trial_image
    for container in pod["initContainers"]:
        # The self-test runs the environment's image with its security settings: what it checks.
        if container["name"] not in (ENVIRONMENT_CONTAINER, SANDBOX_CHECK_CONTAINER):
            continue
        if options.environment_image:
            container["image"] = options.environment_image
        if options.environment_env and container["name"] == ENVIRONMENT_CONTAINER:
            names = {name for name, _ in options.environment_env}
            env = container.setdefault("env", [])
            env[:] = [item for item in env if item.get("name") not in names]
            env.extend({"name": name, "value": value} for name, value in options.environment_env)
        if options.runtime_class:
            # Inside gVisor/Kata the pod is the sandbox: code_exec runs without bubblewrap,
            # which needed the Localhost seccomp profile, AppArmor off and an unmasked /proc;
            # the runtime's defaults are enough.
            security = container.setdefault("securityContext", {})
            security["seccompProfile"] = {"type": "RuntimeDefault"}
            security["appArmorProfile"] = {"type": "RuntimeDefault"}
            security.pop("procMount", None)
            env = container.setdefault("env", [])
            env[:] = [item for item in env if item.get("name") != "ATOLL_CODE_TRUST_OUTER_SANDBOX"]
            env.append({"name": "ATOLL_CODE_TRUST_OUTER_SANDBOX", "value": "1"})
    return job


__all__ = ["JobOptions", "build_job", "job_name", "load_template", "run_label"]
