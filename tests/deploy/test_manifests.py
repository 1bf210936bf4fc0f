"""Kubernetes manifests validate offline against the Kubernetes schemas, and say what the
design asks: namespaced RBAC, a locked-down trial pod, generated Jobs that validate too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from atoll.trial import TrialSpec
from orchestrator.executors.kubernetes_job import JobOptions, build_job, load_template

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "k8s" / "base"
OVERLAY = ROOT / "k8s" / "overlays" / "example"
TRIALS = ROOT / "k8s" / "trials"
OVERLAY_TRIALS = OVERLAY / "trials"
K8S_VERSION = "1.32.0"


def _validate(document: dict) -> None:
    kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def _base_documents(directory: Path = BASE) -> list[dict]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    documents = []
    for name in kustomization["resources"]:
        documents += [doc for doc in yaml.safe_load_all((directory / name).read_text()) if doc]
    return documents


def _find(documents: list[dict], kind: str, name: str) -> dict:
    return next(doc for doc in documents if doc["kind"] == kind and doc["metadata"]["name"] == name)


def _render(directory: Path) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # without kustomize, the base files themselves are what we can check
        return _base_documents()
    rendered = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


def _trial_spec(**fields) -> TrialSpec:
    values = {
        "experiment": "Quarterly eval #3",
        "task_id": "t1",
        "world_id": "w1",
        "world_digest": "d" * 64,
        "agent_name": "react",
        "agent": "react_toolbelt",
        "model": "openai/gpt-4o",
        "run_index": 0,
    }
    values.update(fields)
    return TrialSpec(**values)


@pytest.mark.parametrize("directory", [BASE, TRIALS], ids=["base", "trials"])
def test_every_base_file_is_a_listed_resource_and_validates(directory):
    listed = set(yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"])
    on_disk = {path.name for path in directory.glob("*.yaml")} - {"kustomization.yaml", "trial-job.yaml"}
    assert on_disk == listed
    documents = _base_documents(directory)
    for document in documents:
        _validate(document)
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in documents}
    expected = {
        BASE: [
            ("Namespace", "atoll"),
            ("Deployment", "grader"),
            ("Service", "grader"),
            ("Deployment", "orchestrator"),
            ("Deployment", "worker"),
            ("StatefulSet", "postgres"),
            ("NetworkPolicy", "atoll-default-deny"),
        ],
        TRIALS: [
            ("Namespace", "atoll-trials"),
            ("Role", "atoll-trial-manager"),
            ("RoleBinding", "atoll-trial-manager"),
            ("ServiceAccount", "atoll-trial"),
            ("NetworkPolicy", "atoll-default-deny"),
            ("NetworkPolicy", "atoll-trial"),
        ],
    }[directory]
    assert set(expected) <= kinds


@pytest.mark.parametrize("directory", [BASE, TRIALS], ids=["base", "trials"])
def test_the_base_holds_no_secret_and_denies_all_traffic_by_default(directory):
    documents = _base_documents(directory)
    # A placeholder Secret in the base would overwrite the real one on every `apply -k`.
    assert not [doc["metadata"]["name"] for doc in documents if doc["kind"] == "Secret"]
    policies = [doc for doc in documents if doc["kind"] == "NetworkPolicy"]
    [deny] = [doc for doc in policies if doc["spec"]["podSelector"] == {}]
    assert set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]
    # Every workload is selected by an allowing policy (else it would be cut off entirely).
    selectors = [doc["spec"]["podSelector"].get("matchLabels") for doc in policies if doc is not deny]
    for doc in documents:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert any(s and s.items() <= labels.items() for s in selectors), doc["metadata"]["name"]


@pytest.mark.parametrize(
    "directory",
    [BASE, OVERLAY, TRIALS, OVERLAY_TRIALS],
    ids=["base", "example-overlay", "trials", "example-overlay-trials"],
)
def test_kustomize_output_validates(directory):
    documents = _render(directory)
    assert len(documents) >= (15 if directory in (BASE, OVERLAY) else 7)
    for document in documents:
        _validate(document)
    if directory == OVERLAY_TRIALS and shutil.which("kubectl"):
        # Everything that names the control namespace follows the overlay's.
        assert {doc["metadata"].get("namespace") for doc in documents if doc["kind"] != "Namespace"} == {
            "atoll-prod-trials"
        }
        binding = _find(documents, "RoleBinding", "atoll-trial-manager")
        assert binding["subjects"][0]["namespace"] == "atoll-prod"
        assert (
            _find(documents, "Service", "grader")["spec"]["externalName"]
            == "grader.atoll-prod.svc.cluster.local"
        )
        namespace = _find(documents, "Namespace", "atoll-prod-trials")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"  # gVisor
        trial = _find(documents, "NetworkPolicy", "atoll-trial")
        control = {
            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            for rule in trial["spec"]["egress"]
            for peer in rule.get("to", [])
            if peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name")
            in ("grader", "model-proxy")
        }
        assert control == {"atoll-prod"}
        # Its cloud bucket is reachable from trial pods (the in-cluster rule cannot be),
        # through one private endpoint on 443, not the internet.
        blocks = [
            peer["ipBlock"]
            for rule in trial["spec"]["egress"]
            for peer in rule.get("to", [])
            if "ipBlock" in peer
        ]
        assert blocks == [{"cidr": "10.0.64.0/24"}]
    if directory == OVERLAY and shutil.which("kubectl"):
        assert {doc["metadata"].get("namespace") for doc in documents if doc["kind"] != "Namespace"} == {
            "atoll-prod"
        }
        worker = next(
            doc for doc in documents if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "worker"
        )
        env = {
            item["name"]: item.get("value")
            for item in worker["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["ATOLL_K8S_RUNTIME_CLASS"] == "gvisor" and env["ATOLL_K8S_MAX_PENDING"] == "64"
        assert env["ATOLL_K8S_NAMESPACE"] == "atoll-prod-trials"
        for name in ("atoll-grader", "atoll-model-proxy"):
            [peer, *_] = _find(documents, "NetworkPolicy", name)["spec"]["ingress"][0]["from"]
            assert (
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == "atoll-prod-trials"
            )


def test_the_orchestrator_may_manage_jobs_and_pods_in_the_trial_namespace_only():
    documents = _base_documents()
    trials = _base_documents(TRIALS)
    kinds = {doc["kind"] for doc in documents + trials}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    # No Role at all in the control namespace: no Job rights there.
    assert not [doc for doc in documents if doc["kind"] in ("Role", "RoleBinding")]
    role = next(doc for doc in trials if doc["kind"] == "Role")
    resources = {resource for rule in role["rules"] for resource in rule["resources"]}
    assert resources == {"jobs", "jobs/status", "pods", "pods/log", "events", "leases"}
    leases_rule = next(rule for rule in role["rules"] if rule["resources"] == ["leases"])
    assert leases_rule["apiGroups"] == ["coordination.k8s.io"] and "list" not in leases_rule["verbs"]
    events_rule = next(rule for rule in role["rules"] if rule["resources"] == ["events"])
    assert set(events_rule["verbs"]) == {"get", "list", "watch"}  # read only
    jobs_rule = next(rule for rule in role["rules"] if rule["resources"] == ["jobs"])
    assert {"create", "delete", "list", "watch"} <= set(jobs_rule["verbs"])
    binding = next(doc for doc in trials if doc["kind"] == "RoleBinding")
    # The workers' service account of the control namespace, bound in the trial namespace.
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "atoll-orchestrator", "namespace": "atoll"}
    ]
    worker = _find(documents, "Deployment", "worker")
    env = {
        item["name"]: item.get("value") for item in worker["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["ATOLL_K8S_NAMESPACE"] == "atoll-trials"
    template = load_template(BASE / "trial-job.yaml")
    assert template["spec"]["template"]["spec"]["serviceAccountName"] == "atoll-trial"
    assert ("ServiceAccount", "atoll-trial") in {(doc["kind"], doc["metadata"]["name"]) for doc in trials}
    workers = [
        doc
        for doc in documents
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] in ("orchestrator", "worker")
    ]
    assert all(
        doc["spec"]["template"]["spec"]["serviceAccountName"] == "atoll-orchestrator" for doc in workers
    )


def test_trial_pods_accept_no_connections_and_reach_only_dns_grader_model_proxy_and_store():
    policy = _find(_base_documents(TRIALS), "NetworkPolicy", "atoll-trial")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "atoll-trial"}
    assert policy["spec"]["ingress"] == [] and set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    destinations = set()
    for rule in policy["spec"]["egress"]:
        for peer in rule["to"]:
            assert "ipBlock" not in peer  # no open-ended CIDR
            destinations.add(
                (
                    peer["podSelector"]["matchLabels"].get("app.kubernetes.io/name")
                    or peer["podSelector"]["matchLabels"].get("k8s-app"),
                    (peer["namespaceSelector"].get("matchLabels") or {}).get("kubernetes.io/metadata.name"),
                )
            )
    # DNS only from kube-dns; grader and proxy of the control namespace; the store anywhere.
    assert destinations == {
        ("kube-dns", "kube-system"),
        ("grader", "atoll"),
        ("model-proxy", "atoll"),
        ("object-store", None),
    }
    # The control namespace's grader and model proxy take calls from those pods, by namespace.
    for name in ("atoll-grader", "atoll-model-proxy"):
        [peer, *_] = _find(_base_documents(), "NetworkPolicy", name)["spec"]["ingress"][0]["from"]
        assert peer == {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "atoll-trials"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "atoll-trial"}},
        }
    # Their short names resolve in the trial namespace (the template's URLs are unchanged).
    services = {
        doc["metadata"]["name"]: doc["spec"] for doc in _base_documents(TRIALS) if doc["kind"] == "Service"
    }
    assert services == {
        "grader": {"type": "ExternalName", "externalName": "grader.atoll.svc.cluster.local"},
        "model-proxy": {"type": "ExternalName", "externalName": "model-proxy.atoll.svc.cluster.local"},
    }


def test_trial_pods_get_no_artifact_store_credentials():
    """Trial pods reach an S3 store through per-attempt presigned URLs only: no container of
    the template (nor of a built Job) takes the store's Secret or any AWS_* variable."""
    template = load_template(BASE / "trial-job.yaml")
    job = build_job(
        template,
        _trial_spec(),
        1,
        "s3://bucket/runs/x/input.json",
        JobOptions(namespace="atoll"),
        pod_input="https://s3.example/bucket/runs/x/input.json?X-Amz-Signature=abc",
    )
    pod = job["spec"]["template"]["spec"]
    for container in pod["containers"] + pod["initContainers"]:
        sources = [ref for item in container.get("envFrom", []) for ref in item.values()]
        assert all(ref["name"] != "atoll-artifact-store" for ref in sources), container["name"]
        assert not [v for v in container.get("env", []) if v["name"].startswith(("AWS_", "FSSPEC_"))]
    assert pod["containers"][0]["args"][-1].startswith("https://s3.example/")
    assert job["metadata"]["annotations"]["atoll.dev/input"] == "s3://bucket/runs/x/input.json"


def test_generated_jobs_validate_and_carry_limits_labels_and_the_sandbox_choice():
    template = load_template(BASE / "trial-job.yaml")
    spec = _trial_spec()
    job = build_job(template, spec, 2, "s3://bucket/runs/x/input.json", JobOptions(namespace="atoll"))
    _validate(job)
    assert len(job["metadata"]["name"]) <= 63 and job["metadata"]["labels"]["atoll.dev/attempt"] == "2"
    # Disruptions are replaced by the Job; the trial command's own failures end it at once.
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert rules[1]["action"] == "FailJob" and rules[1]["onExitCodes"]["containerName"] == "trial"
    assert (
        job["spec"]["template"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
        == "false"
    )
    assert "priorityClassName" not in job["spec"]["template"]["spec"]
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    containers = pod["containers"] + pod["initContainers"]
    for container in containers:
        assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    check, environment = pod["initContainers"]
    assert environment["restartPolicy"] == "Always"  # a native sidecar: the Job ends with the trial
    # The sandbox self-test runs first, with the environment's image and security settings.
    assert check["name"] == "sandbox-check" and "restartPolicy" not in check
    assert (
        check["image"] == environment["image"] and check["securityContext"] == environment["securityContext"]
    )
    # bubblewrap's user namespaces and its mounts in them: what compose's security_opt allows
    # (compose: seccomp off; the pod: the shipped Localhost profile, see the tests below).
    assert environment["securityContext"]["seccompProfile"]["type"] == "Localhost"
    assert environment["securityContext"]["appArmorProfile"]["type"] == "Unconfined"
    assert environment["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "privileged" not in environment["securityContext"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["environment"]
    assert set(compose["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined"}
    assert not compose.get("privileged") and not compose.get("cap_add")

    gvisor = build_job(
        template,
        spec,
        1,
        "s3://b/i.json",
        JobOptions(
            namespace="atoll",
            runtime_class="gvisor",
            trial_image="r/o:1",
            environment_image="r/e:1",
            priority_class="atoll-trials",
        ),
    )
    _validate(gvisor)
    pod = gvisor["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "gvisor" and pod["priorityClassName"] == "atoll-trials"
    check, environment = pod["initContainers"]
    assert environment["image"] == "r/e:1" and pod["containers"][0]["image"] == "r/o:1"
    assert check["image"] == "r/e:1" and check["securityContext"] == environment["securityContext"]
    assert {"name": "ATOLL_CODE_TRUST_OUTER_SANDBOX", "value": "1"} in check["env"]
    assert environment["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert environment["securityContext"]["appArmorProfile"]["type"] == "RuntimeDefault"
    assert {"name": "ATOLL_CODE_TRUST_OUTER_SANDBOX", "value": "1"} in environment["env"]
    # The template itself is untouched by building Jobs from it.
    assert "runtimeClassName" not in template["spec"]["template"]["spec"]


def test_a_template_without_the_trial_and_environment_containers_is_refused(tmp_path):
    from atoll.errors import AtollError

    broken = tmp_path / "job.yaml"
    broken.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "spec": {"template": {"spec": {"containers": [{"name": "x"}]}}},
            }
        )
    )
    with pytest.raises(AtollError, match="needs a container 'trial' and an initContainer 'environment'"):
        load_template(broken)


def test_workers_drain_within_their_grace_have_probes_on_their_alive_file_and_no_secret_in_args():
    documents = _base_documents()
    worker = next(
        doc for doc in documents if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "worker"
    )
    pod = worker["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {item["name"]: item.get("value") for item in container.get("env", [])}
    # SIGTERM drains for ATOLL_DRAIN_GRACE_S, then waits up to CANCEL_WAIT_S for the abandoned
    # trials and again for the result writer, then gives the leases back and deletes its Lease:
    # all of it must end before the kubelet's SIGKILL (15 s left for the last two calls).
    from orchestrator.scheduler import CANCEL_WAIT_S

    drain = float(env["ATOLL_DRAIN_GRACE_S"]) + 2 * CANCEL_WAIT_S + 15
    assert drain <= pod["terminationGracePeriodSeconds"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert env["ATOLL_WORKER_ALIVE_FILE"] in " ".join(container[probe]["exec"]["command"])
    # No variable (the store URL carries the database password) expanded into a command line.
    for doc in documents:
        spec = (doc.get("spec") or {}).get("template", {}).get("spec") or {}
        for each in spec.get("containers", []) + spec.get("initContainers", []):
            assert not [arg for arg in each.get("args", []) + each.get("command", []) if "$(" in arg], each[
                "name"
            ]


def test_trial_pods_have_a_working_egress_path_to_the_shipped_model_proxy():
    documents = _base_documents()
    policies = {
        doc["metadata"]["name"]: doc
        for doc in documents + _base_documents(TRIALS)
        if doc["kind"] == "NetworkPolicy" and doc["metadata"]["name"] != "atoll-default-deny"
    }
    service = next(
        doc for doc in documents if doc["kind"] == "Service" and doc["metadata"]["name"] == "model-proxy"
    )
    proxy = next(
        doc for doc in documents if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "model-proxy"
    )
    proxy_labels = proxy["spec"]["template"]["metadata"]["labels"]
    assert (
        service["spec"]["selector"].items() <= proxy_labels.items()
        and service["spec"]["ports"][0]["port"] == 4000
    )
    # The trial pods' policy lets them out to exactly those pods on that port …
    [rule] = [
        rule
        for rule in policies["atoll-trial"]["spec"]["egress"]
        if any(
            peer["podSelector"]["matchLabels"].get("app.kubernetes.io/name") == "model-proxy"
            for peer in rule["to"]
        )
    ]
    assert rule["to"][0]["podSelector"]["matchLabels"].items() <= proxy_labels.items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 4000}]
    # … the proxy's policy lets them in, and the proxy out to DNS and HTTPS only.
    proxy_policy = policies["atoll-model-proxy"]["spec"]
    assert {"app.kubernetes.io/name": "atoll-trial"} in [
        peer["podSelector"]["matchLabels"] for peer in proxy_policy["ingress"][0]["from"]
    ]
    assert proxy_policy["egress"][-1] == {"ports": [{"protocol": "TCP", "port": 443}]}
    # Its provider keys come from a Secret you create; none is in the base or on its command line.
    [container] = proxy["spec"]["template"]["spec"]["containers"]
    assert container["envFrom"] == [{"secretRef": {"name": "atoll-model-proxy"}}]
    assert not any("KEY" in arg for arg in container["args"])


BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip


def _baseline_violations(pod: dict) -> list[str]:
    """What the Pod Security "baseline" level refuses in a pod spec (its controls, read from
    the Pod Security Standards: host namespaces, privileged, added capabilities, hostPath,
    host ports, AppArmor, SELinux, /proc mount type, seccomp, sysctls)."""
    found = [key for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    found += [f"volume {v['name']}: hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    contexts = [("pod", pod.get("securityContext") or {})]
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        context = container.get("securityContext") or {}
        contexts.append((container["name"], context))
        if context.get("privileged"):
            found.append(f"{container['name']}: privileged")
        if set((context.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES:
            found.append(f"{container['name']}: capabilities")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{container['name']}: procMount")
        found += [
            f"{container['name']}: hostPort" for port in container.get("ports", []) if port.get("hostPort")
        ]
    for name, context in contexts:
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}: AppArmor Unconfined")
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}: seccomp Unconfined")
        if (context.get("seLinuxOptions") or {}).get("type") or (context.get("seLinuxOptions") or {}).get(
            "user"
        ):
            found.append(f"{name}: SELinux options")
    if (pod.get("securityContext") or {}).get("sysctls"):
        found.append("sysctls")
    return found


def test_the_control_namespace_enforces_baseline_and_every_pod_in_it_passes():
    """Only trial pods need more than baseline, and they run in the trial namespace; a pod of
    the control namespace that baseline refuses would not start."""
    documents = _base_documents()
    [namespace] = [doc for doc in documents if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    pods = [
        doc["spec"]["template"]["spec"] for doc in documents if doc["kind"] in ("Deployment", "StatefulSet")
    ]
    assert len(pods) >= 5
    for pod in pods:
        assert _baseline_violations(pod) == []
    # The check does see what the trial pod needs (so it would see it here too).
    trial = load_template(BASE / "trial-job.yaml")["spec"]["template"]["spec"]
    assert "environment: procMount" in _baseline_violations(trial)
    assert "environment: AppArmor Unconfined" in _baseline_violations(trial)


CLUSTER_SETUP = ROOT / "k8s" / "cluster-setup"
PROFILE = CLUSTER_SETUP / "atoll-environment.json"
SANDBOX_SYSCALLS = ["clone", "unshare", "mount", "umount2", "pivot_root", "sethostname", "keyctl"]


def _documented_shape() -> dict:
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = text.split("<!-- trial-pod-shape -->", 1)[1].split("<!-- /trial-pod-shape -->", 1)[0]
    return yaml.safe_load(block.split("```yaml", 1)[1].split("```", 1)[0])


def _shape_of(job: dict) -> dict:
    pod = job["spec"]["template"]["spec"]
    init = {c["name"]: c for c in pod["initContainers"]}
    [trial] = [c for c in pod["containers"] if c["name"] == "trial"]
    # The self-test checks the sandbox with the environment's own settings: always the same.
    assert init["sandbox-check"]["securityContext"] == init["environment"]["securityContext"]
    shape = {
        "pod": {"securityContext": pod["securityContext"]},
        "environment": {"securityContext": init["environment"]["securityContext"]},
        "trial": {"securityContext": trial["securityContext"]},
    }
    if "hostUsers" in pod:
        shape["pod"]["hostUsers"] = pod["hostUsers"]
    return shape


def test_the_trial_pod_has_the_shape_docs_deploy_md_documents():
    documented = _documented_shape()
    assert documented["pod"]["hostUsers"] is False
    assert documented["environment"]["securityContext"]["procMount"] == "Unmasked"
    template = load_template(BASE / "trial-job.yaml")
    assert _shape_of(template) == documented
    # What the executor sends, and what the workers read from the rendered ConfigMap.
    job = build_job(template, _trial_spec(), 1, "s3://b/i.json", JobOptions(namespace="atoll"))
    _validate(job)
    assert _shape_of(job) == documented
    rendered = next(
        doc
        for doc in _render(BASE)
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("atoll-trial-job")
    )
    if "data" in rendered:  # kustomize's output (the base files hold the generator only)
        assert _shape_of(yaml.safe_load(rendered["data"]["trial-job.yaml"])) == documented
    # The shape needs the privileged level (AppArmor Unconfined, procMount Unmasked), as
    # documented — on the trial namespace only: warned at baseline, audited at restricted.
    [namespace] = [doc for doc in _base_documents(TRIALS) if doc["kind"] == "Namespace"]
    assert {k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/warn": "baseline",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    [control] = [doc for doc in _base_documents() if doc["kind"] == "Namespace"]
    assert control["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    # No container is privileged or gains a capability.
    pod = job["spec"]["template"]["spec"]
    for container in pod["containers"] + pod["initContainers"]:
        assert "privileged" not in container["securityContext"]
        assert "add" not in container["securityContext"]["capabilities"]


def test_under_a_sandboxing_runtime_the_pod_gets_the_runtime_defaults_back():
    template = load_template(BASE / "trial-job.yaml")
    job = build_job(
        template, _trial_spec(), 1, "s3://b/i.json", JobOptions(namespace="atoll", runtime_class="gvisor")
    )
    _validate(job)
    pod = job["spec"]["template"]["spec"]
    assert "hostUsers" not in pod
    for container in pod["initContainers"]:
        security = container["securityContext"]
        assert "procMount" not in security
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert security["appArmorProfile"] == {"type": "RuntimeDefault"}
    assert template["spec"]["template"]["spec"]["hostUsers"] is False  # the template is untouched


def test_the_node_setup_installs_the_profile_the_trial_pod_names():
    documents = _render(CLUSTER_SETUP) if shutil.which("kubectl") else []
    if not documents:  # without kustomize, the files themselves
        documents = [
            doc
            for name in ("namespace.yaml", "seccomp-installer.yaml", "admission-policy.yaml")
            for doc in yaml.safe_load_all((CLUSTER_SETUP / name).read_text())
        ]
    for document in documents:
        _validate(document)
    [daemonset] = [doc for doc in documents if doc["kind"] == "DaemonSet"]
    [namespace] = [doc for doc in documents if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "atoll-node-setup"  # never atoll's own namespace
    pod = daemonset["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["host-seccomp"]["hostPath"]["path"] == "/var/lib/kubelet/seccomp"
    [container] = pod["containers"]
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert "/host-seccomp/profiles" in container["command"][-1] and mounts["host-seccomp"] == "/host-seccomp"
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    # The installed file is the trial pod's Localhost profile, byte for byte.
    named = _documented_shape()["environment"]["securityContext"]["seccompProfile"]["localhostProfile"]
    assert named == f"profiles/{PROFILE.name}"
    configmaps = [doc for doc in documents if doc["kind"] == "ConfigMap"]
    if configmaps:
        assert configmaps[0]["data"][PROFILE.name] == PROFILE.read_text()
        assert volumes["profiles"]["configMap"]["name"] == configmaps[0]["metadata"]["name"]
        assert (
            daemonset["metadata"]["namespace"] == configmaps[0]["metadata"]["namespace"] == "atoll-node-setup"
        )
    # The admission policy (its CEL: tests/deploy/test_admission_policy.py) is cluster-scoped,
    # denies, matches the orchestrators' Jobs and allows the environment's profile by that name.
    [policy] = [doc for doc in documents if doc["kind"] == "ValidatingAdmissionPolicy"]
    [binding] = [doc for doc in documents if doc["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert "namespace" not in policy["metadata"] and "namespace" not in binding["metadata"]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["jobs"] and "CREATE" in rule["operations"]
    assert ":atoll-orchestrator" in policy["spec"]["matchConditions"][0]["expression"]
    assert any(named in v["expression"] for v in policy["spec"]["validations"])


def _sandbox_under_profile(*, without: str | None = None) -> subprocess.CompletedProcess:
    probe = (
        "import json, pathlib, tempfile\n"
        "from mcp_servers.code.sandbox import SandboxLimits, run_command, sandbox_status\n"
        "status = sandbox_status()\n"
        "out = {'available': status.available, 'mode': status.mode, 'reason': status.reason}\n"
        "if status.available:\n"
        "    root = pathlib.Path(tempfile.mkdtemp())\n"
        "    (root / 'notes.txt').write_text('world file')\n"
        "    result = run_command('cat notes.txt; python3 -c \"print(6*7)\"', root, SandboxLimits())\n"
        "    out['output'] = result.output\n"
        "print(json.dumps(out))\n"
    )
    command = [sys.executable, str(Path(__file__).with_name("seccomp_loader.py")), str(PROFILE)]
    if without:
        command += ["--without", without]
    command += ["--", sys.executable, "-c", probe]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)


def test_the_sandbox_builds_and_runs_code_under_the_shipped_seccomp_profile():
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"  # an allow list, not Unconfined
    allowed = {
        name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]
    }
    for dangerous in [
        "bpf",
        "setns",
        "ptrace",
        "init_module",
        "kexec_load",
        "open_tree",
        "add_key",
        "userfaultfd",
    ]:
        assert dangerous not in allowed
    assert set(SANDBOX_SYSCALLS) <= allowed
    done = _sandbox_under_profile()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["available"] and result["mode"] == "procfs", result
    assert result["output"] == "world file42\n"


@pytest.mark.parametrize("syscall", SANDBOX_SYSCALLS)
def test_each_system_call_the_profile_adds_is_one_bubblewrap_needs(syscall):
    done = _sandbox_under_profile(without=syscall)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["available"] and "bubblewrap" in result["reason"], result
