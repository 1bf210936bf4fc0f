"""The ValidatingAdmissionPolicy of k8s/cluster-setup/admission-policy.yaml, its CEL evaluated
with cel-python (standard CEL, not the API server's typed environment): the Jobs the executor
builds are admitted, each broken trial-pod shape is refused, and only atoll-orchestrator's
requests are matched. No API server runs here; a first real run still applies the policy with
`kubectl apply --dry-run=server` and tries one broken Job (docs/deploy.md, checklist).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import celpy
import pytest
import yaml
from celpy import celtypes

from atoll.trial import TrialSpec
from orchestrator.executors.kubernetes_job import JobOptions, build_job, load_template

ROOT = Path(__file__).resolve().parents[2]
POLICY = next(
    doc
    for doc in yaml.safe_load_all((ROOT / "k8s" / "cluster-setup" / "admission-policy.yaml").read_text())
    if doc["kind"] == "ValidatingAdmissionPolicy"
)
ENV = celpy.Environment()


def _evaluate(expression: str, activation: dict):
    return ENV.program(ENV.compile(expression)).evaluate(activation)


def verdict(job: dict, username: str) -> list[str]:
    """The messages of the failed validations ([] = admitted); ['not matched'] when the
    policy's match conditions leave the request alone."""
    activation = {
        "object": celpy.json_to_cel(job),
        "request": celpy.json_to_cel({"userInfo": {"username": username}}),
    }
    for condition in POLICY["spec"]["matchConditions"]:
        if not _evaluate(condition["expression"], activation):
            return ["not matched"]
    variables = celtypes.MapType()
    for variable in POLICY["spec"]["variables"]:
        activation["variables"] = variables
        variables[celtypes.StringType(variable["name"])] = _evaluate(variable["expression"], activation)
    activation["variables"] = variables
    failed = []
    for validation in POLICY["spec"]["validations"]:
        result = _evaluate(validation["expression"], activation)
        if isinstance(result, celpy.CELEvalError):
            raise AssertionError(f"evaluation error in {validation['expression']!r}: {result}")
        if not result:
            failed.append(validation["message"])
    return failed


WORKER = "system:serviceaccount:atoll-prod:atoll-orchestrator"
TRIALS_NAMESPACE = yaml.safe_load((ROOT / "k8s" / "trials" / "namespace.yaml").read_text())["metadata"][
    "name"
]
SPEC = TrialSpec(
    experiment="e", task_id="t", world_id="w", world_digest="d" * 64,
    agent_name="a", agent="react_toolbelt", model="m", run_index=0,
)  # fmt: skip


def _built(**options: object) -> dict:
    template = load_template(ROOT / "k8s" / "base" / "trial-job.yaml")
    return build_job(template, SPEC, 1, "s3://b/i.json", JobOptions(namespace=TRIALS_NAMESPACE, **options))


def container(pod: dict, name: str) -> dict:
    return next(c for c in pod["containers"] + pod["initContainers"] if c["name"] == name)


CASES: dict[str, Callable[[dict], object]] = {
    "privileged trial container": lambda pod: container(pod, "trial")["securityContext"].update(
        privileged=True
    ),
    "hostPath volume": lambda pod: pod["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
    "hostNetwork": lambda pod: pod.update(hostNetwork=True),
    "hostPID": lambda pod: pod.update(hostPID=True),
    "a capability added": lambda pod: container(pod, "environment")["securityContext"]["capabilities"].update(
        add=["SYS_ADMIN"]
    ),
    "capabilities kept": lambda pod: container(pod, "trial")["securityContext"].pop("capabilities"),
    "privilege escalation": lambda pod: container(pod, "trial")["securityContext"].update(
        allowPrivilegeEscalation=True
    ),
    "Unconfined seccomp": lambda pod: container(pod, "environment")["securityContext"].update(
        seccompProfile={"type": "Unconfined"}
    ),
    "another Localhost profile": lambda pod: container(pod, "environment")["securityContext"].update(
        seccompProfile={"type": "Localhost", "localhostProfile": "profiles/other.json"}
    ),
    "the environment's profile on the trial": lambda pod: container(pod, "trial")["securityContext"].update(
        seccompProfile={"type": "Localhost", "localhostProfile": "profiles/atoll-environment.json"}
    ),
    "AppArmor off for the trial": lambda pod: container(pod, "trial")["securityContext"].update(
        appArmorProfile={"type": "Unconfined"}
    ),
    "unmasked /proc in the node's user namespace": lambda pod: pod.pop("hostUsers"),
    "unmasked /proc for the trial": lambda pod: container(pod, "trial")["securityContext"].update(
        procMount="Unmasked"
    ),
    "another service account": lambda pod: pod.update(serviceAccountName="atoll-orchestrator"),
    "an API token": lambda pod: pod.update(automountServiceAccountToken=True),
    "root allowed": lambda pod: pod["securityContext"].pop("runAsNonRoot"),
    "pod-level Unconfined seccomp": lambda pod: pod["securityContext"].update(
        seccompProfile={"type": "Unconfined"}
    ),
}


def broken(change: Callable[[dict], object]) -> dict:
    job = copy.deepcopy(_built())
    change(job["spec"]["template"]["spec"])
    return job


@pytest.mark.parametrize("options", [{}, {"runtime_class": "gvisor"}], ids=["bubblewrap", "gvisor"])
def test_the_jobs_the_executor_builds_are_admitted(options):
    assert verdict(_built(**options), WORKER) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_broken_trial_pod_shape_is_refused(name):
    assert verdict(broken(CASES[name]), WORKER) not in ([], ["not matched"]), f"{name} is admitted"


def test_only_the_orchestrators_requests_are_matched():
    job = broken(CASES["hostNetwork"])
    assert verdict(job, "system:serviceaccount:kube-system:job-controller") == ["not matched"]
    assert verdict(job, "system:serviceaccount:atoll:atoll-orchestrator") != ["not matched"]
