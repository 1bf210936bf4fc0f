"""The settings kit: one base for every settings class, secrets typed as secrets."""

from __future__ import annotations

import importlib
import typing

import pytest
from pydantic import SecretStr, ValidationError

from atoll.settings import AtollSettings, child_environment, secret_text

# Every settings class of the services (module, class).
SETTINGS_CLASSES = [
    ("environment.settings", "EnvironmentSettings"),
    ("agents_runner.settings", "AgentRunnerSettings"),
    ("grader.settings", "GraderSettings"),
    ("grader.harbor_verifier", "VerifierSettings"),
    ("orchestrator.api", "ApiSettings"),
    ("orchestrator.events", "EventSettings"),
    ("orchestrator.executors.local", "ServiceSettings"),
    ("orchestrator.executors.kubernetes", "KubernetesSettings"),
    ("orchestrator.runner", "WorkerSettings"),
    ("orchestrator.store_retry", "StoreRetrySettings"),
    ("atoll.service_tokens", "TokenDirSettings"),
]
# (coworker_api_key_secret and api_key_env name where a key is kept; they are not keys)
_SECRET_NAMES = ("token", "api_key", "webhook_secret")


def _settings_class(module: str, name: str) -> type:
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("module", "name"), SETTINGS_CLASSES, ids=[name for _, name in SETTINGS_CLASSES])
def test_every_settings_class_derives_from_the_one_base(module, name):
    settings = _settings_class(module, name)
    assert issubclass(settings, AtollSettings)
    config = settings.model_config
    assert (config["extra"], config["case_sensitive"], config["env_file"]) == ("ignore", False, None)


@pytest.mark.parametrize(("module", "name"), SETTINGS_CLASSES, ids=[name for _, name in SETTINGS_CLASSES])
def test_every_token_and_key_is_a_secret(module, name):
    """A token or key held as a plain string would show in repr() and in a settings dump."""
    settings = _settings_class(module, name)
    plain = [
        field
        for field, info in settings.model_fields.items()
        if field.endswith(_SECRET_NAMES)
        and SecretStr not in typing.get_args(info.annotation) + (info.annotation,)
    ]
    assert plain == []


def test_the_environment_token_is_the_same_secret_for_the_environment_and_its_callers(monkeypatch):
    from environment.settings import EnvironmentSettings
    from orchestrator.executors.local import ServiceSettings

    monkeypatch.setenv("ATOLL_ENV_TOKEN", "env-secret-1")
    for settings in (EnvironmentSettings(), ServiceSettings()):
        assert "env-secret-1" not in repr(settings)
        assert secret_text(settings.env_token) == "env-secret-1"

    monkeypatch.setenv("ATOLL_ENV_TOKEN", " ")
    for settings_class in (EnvironmentSettings, ServiceSettings):
        with pytest.raises(ValidationError, match="ATOLL_ENV_TOKEN is set but empty"):
            settings_class()


def test_a_child_process_inherits_the_environment_with_the_overrides(monkeypatch):
    monkeypatch.setenv("ATOLL_TEST_INHERITED", "yes")
    environment = child_environment(OMP_THREAD_LIMIT="1")
    assert environment["ATOLL_TEST_INHERITED"] == "yes"
    assert environment["OMP_THREAD_LIMIT"] == "1"
