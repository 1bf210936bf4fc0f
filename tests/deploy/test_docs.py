"""docs/deploy.md documents every setting of the deployment-facing settings classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.api import ApiSettings
from orchestrator.executors.kubernetes import KubernetesSettings
from orchestrator.executors.local import ServiceSettings

DOC = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()


def _service_settings():
    from agents_runner.settings import AgentRunnerSettings
    from environment.settings import EnvironmentSettings
    from grader.settings import GraderSettings

    return [EnvironmentSettings, AgentRunnerSettings, GraderSettings]


@pytest.mark.parametrize("settings", [ServiceSettings, ApiSettings, KubernetesSettings, *_service_settings()],
                         ids=lambda settings: settings.__name__)
def test_every_setting_is_in_the_environment_variable_table(settings):
    prefix = settings.model_config["env_prefix"]
    table = DOC[DOC.index("## Environment variables"):]
    missing = [f"{prefix}{name.upper()}" for name in settings.model_fields
               if f"| `{prefix}{name.upper()}` |" not in table]
    assert not missing, f"add to docs/deploy.md's table: {missing}"


def test_the_doc_says_plainly_that_no_cluster_or_engine_was_available():
    assert "No Docker engine and no Kubernetes cluster were available" in DOC
    assert "in-test HTTP stand-in" in DOC
