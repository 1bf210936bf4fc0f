"""docs/deploy.md documents every setting of the deployment-facing settings classes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from atoll.service_tokens import TokenDirSettings
from orchestrator.api import ApiSettings
from orchestrator.executors.kubernetes import KubernetesSettings
from orchestrator.executors.local import ServiceSettings
from orchestrator.runner import WorkerSettings
from orchestrator.store_retry import StoreRetrySettings

DOC = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()


def _service_settings():
    from agents_runner.settings import AgentRunnerSettings
    from environment.settings import EnvironmentSettings
    from grader.settings import GraderSettings

    return [EnvironmentSettings, AgentRunnerSettings, GraderSettings]


@pytest.mark.parametrize(
    "settings",
    [
        ServiceSettings,
        ApiSettings,
        KubernetesSettings,
        WorkerSettings,
        StoreRetrySettings,
        TokenDirSettings,
        *_service_settings(),
    ],
    ids=lambda settings: settings.__name__,
)
def test_every_setting_is_in_the_environment_variable_table(settings):
    prefix = settings.model_config["env_prefix"]
    table = DOC[DOC.index("## Environment variables") :]
    missing = [
        f"{prefix}{name.upper()}"
        for name in settings.model_fields
        if f"| `{prefix}{name.upper()}` |" not in table
    ]
    assert not missing, f"add to docs/deploy.md's table: {missing}"


def test_the_doc_says_plainly_what_ran_for_real_and_what_did_not():
    text = " ".join(DOC.split())
    assert "A Docker engine was available where this was built; a Kubernetes cluster was not" in text
    assert "in-test HTTP stand-in" in text and "tests/deploy/container_test.sh" in text


def test_the_doc_gives_each_image_a_measured_size_and_build_time():
    table = DOC[DOC.index("| image | size |") :]
    table = table[: table.index("\n\n")]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert set(rows) == {"atoll-environment", "atoll-agents-runner", "atoll-grader", "atoll-orchestrator"}
    for row in rows.values():
        assert re.search(r"\| \d+ MB \|", row) and re.search(r"\d+ min", row), row


def test_every_secret_a_trial_pod_reads_is_created_in_the_trial_namespace_by_the_doc():
    """A Secret is read in its own namespace only; trial pods run in the trial namespace, so
    the setup steps must create each Secret the trial template names there (an optional
    reference that is missing fails silently: the agent's model calls get 401)."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    template = yaml.safe_load((root / "k8s" / "base" / "trial-job.yaml").read_text())
    trials_namespace = yaml.safe_load((root / "k8s" / "trials" / "namespace.yaml").read_text())
    namespace = trials_namespace["metadata"]["name"]
    names = set(re.findall(r"secretRef:\s*\n\s*name:\s*(\S+)", yaml.safe_dump(template)))
    names |= set(re.findall(r"secretKeyRef:\s*\n(?:\s*\w+:.*\n)*?\s*name:\s*(\S+)", yaml.safe_dump(template)))
    assert names, "the trial template reads no Secret: update this test"
    for name in names:
        assert re.search(rf"kubectl -n {namespace} create secret generic {name}\b", DOC), name
