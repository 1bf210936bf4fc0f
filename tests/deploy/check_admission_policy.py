"""Evaluate the CEL of k8s/cluster-setup/admission-policy.yaml with cel-python (standard CEL,
not the API server's environment) against Jobs the executor builds and against Jobs that
break the trial pod's shape, one defect each. Not part of the suite (cel-python is not a
dependency of atoll); run it after changing the policy or the Job template:

    python -m venv /tmp/cel && /tmp/cel/bin/pip install cel-python==0.5.0
    PYTHONPATH=$PWD:$(echo /tmp/cel/lib/python3.*/site-packages) python tests/deploy/check_admission_policy.py

Exits 1 naming the first expectation that does not hold.
"""

from __future__ import annotations

import copy
from pathlib import Path

import celpy
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
            raise SystemExit(f"evaluation error in {validation['expression']!r}: {result}")
        if not result:
            failed.append(validation["message"])
    return failed


def main() -> None:
    template = load_template(ROOT / "k8s" / "base" / "trial-job.yaml")
    spec = TrialSpec(
        experiment="e", task_id="t", world_id="w", world_digest="d" * 64,
        agent_name="a", agent="react_toolbelt", model="m", run_index=0,
    )  # fmt: skip
    worker = "system:serviceaccount:atoll-prod:atoll-orchestrator"
    good = build_job(template, spec, 1, "s3://b/i.json", JobOptions(namespace="atoll"))
    gvisor = build_job(
        template, spec, 1, "s3://b/i.json", JobOptions(namespace="atoll", runtime_class="gvisor")
    )

    def broken(change) -> dict:
        job = copy.deepcopy(good)
        change(job["spec"]["template"]["spec"])
        return job

    def container(pod, name):
        return next(c for c in pod["containers"] + pod["initContainers"] if c["name"] == name)

    cases = {
        "privileged trial container": lambda pod: container(pod, "trial")["securityContext"].update(
            privileged=True
        ),
        "hostPath volume": lambda pod: pod["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "hostNetwork": lambda pod: pod.update(hostNetwork=True),
        "hostPID": lambda pod: pod.update(hostPID=True),
        "a capability added": lambda pod: container(pod, "environment")["securityContext"][
            "capabilities"
        ].update(add=["SYS_ADMIN"]),
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
        "the environment's profile on the trial": lambda pod: container(pod, "trial")[
            "securityContext"
        ].update(seccompProfile={"type": "Localhost", "localhostProfile": "profiles/atoll-environment.json"}),
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
    problems = []
    for name, job in {"the built Job": good, "the gVisor Job": gvisor}.items():
        if (failed := verdict(job, worker)) != []:
            problems.append(f"{name} is refused: {failed}")
    for name, change in cases.items():
        failed = verdict(broken(change), worker)
        print(f"{name}: refused ({'; '.join(failed)})" if failed else f"{name}: ADMITTED")
        if not failed:
            problems.append(f"{name} is admitted")
    if verdict(broken(cases["hostNetwork"]), "system:serviceaccount:kube-system:job-controller") != [
        "not matched"
    ]:
        problems.append("the policy matches users other than atoll-orchestrator")
    if problems:
        raise SystemExit("; ".join(problems))
    print(f"ok: the built Jobs are admitted, {len(cases)} broken shapes refused")


if __name__ == "__main__":
    main()
