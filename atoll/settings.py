"""The settings kit: the one module that reads (and writes) the process environment.

Every service's settings derive from :class:`AtollSettings` (``ATOLL_*`` variables, no env
file, unknown variables ignored, names case-insensitive) and hold their secrets as
:class:`pydantic.SecretStr`, so that ``repr()`` and a settings dump never show them; fields
several services read (the environments' tokens, the allowed Host names) are declared once
here. What no settings class can name — another tool's variable (``HF_HOME``,
``OTEL_*``), a name learnt at run time (a judge's ``api_key_env``), a family scanned by prefix
(``ATOLL_CODE_*``) — is read through :func:`variable` or :func:`environ`; a child process's
environment is built by :func:`child_environment`, and the few writes (a token loaded from a
file, a library's switch set before it is imported) go through :func:`export` and
:func:`set_default`. ``tests/atoll/test_one_home.py`` fails when another module touches
``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "AtollSettings",
    "EnvironmentTokens",
    "HostSettings",
    "child_environment",
    "environ",
    "export",
    "require_non_empty",
    "secret_text",
    "set_default",
    "variable",
]

_Value = TypeVar("_Value")


class AtollSettings(BaseSettings):
    """The base of every settings class: ``ATOLL_<FIELD>`` variables (a subclass narrows the
    prefix, e.g. ``model_config = SettingsConfigDict(env_prefix="ATOLL_AGENT_")``; the rest of
    the configuration is inherited), read from the process environment only (no ``.env``
    file), other variables ignored, names matched whatever their case."""

    model_config = SettingsConfigDict(
        env_prefix="ATOLL_", env_file=None, extra="ignore", case_sensitive=False
    )


class EnvironmentTokens(AtollSettings):
    """The environments' bearer tokens, read by the environment that requires them and by
    whoever calls it (the local executor, the Harbor world container). Set but empty is an
    error everywhere (docs/deploy.md), never "no token"."""

    env_token: SecretStr | None = Field(
        None, description="bearer token for /apps and /data/*; required to bind beyond loopback"
    )
    mcp_token: SecretStr | None = Field(None, description="bearer token for /mcp")

    @field_validator("env_token")
    @classmethod
    def _env_token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_ENV_TOKEN")

    @field_validator("mcp_token")
    @classmethod
    def _mcp_token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_MCP_TOKEN")


class HostSettings(AtollSettings):
    """The Host header names a service answers (its Host guard, :mod:`atoll.http_guard`)."""

    allowed_hosts: str = Field(
        "",
        description="Host header names answered besides localhost, IP literals and the bind name "
        "(comma-separated; '.example.com' for a domain and its subdomains; '*' for any)",
    )


def require_non_empty(value: _Value, variable: str) -> _Value:
    """A pydantic validator body: a secret that is set must not be empty or blank."""
    secret = value.get_secret_value() if isinstance(value, SecretStr) else value
    if secret is not None and not str(secret).strip():
        raise ValueError(f"{variable} is set but empty; unset it for no token, or give a token")
    return value


def secret_text(value: SecretStr | None) -> str | None:
    """A secret as the text to send (None: not set)."""
    return value.get_secret_value() if value is not None else None


def variable(name: str) -> str | None:
    """The value of the environment variable ``name`` now (None when unset), for a name no
    settings class declares: another tool's, or one chosen at run time."""
    return os.environ.get(name)


def environ() -> Mapping[str, str]:
    """The process environment, live and read-only (for readers that scan it by prefix or
    look up names they learn later)."""
    return os.environ


def child_environment(**overrides: str) -> dict[str, str]:
    """The environment a child process inherits, with ``overrides`` set."""
    return {**os.environ, **overrides}


def export(name: str, value: str) -> None:
    """Set ``name`` for this process's later settings reads and its children (a token loaded
    from a file, :mod:`atoll.service_tokens`)."""
    os.environ[name] = value


def set_default(name: str, value: str) -> None:
    """Set ``name`` unless the operator did: a library that reads its configuration from the
    environment when it is imported (litellm's ``LITELLM_LOCAL_MODEL_COST_MAP``) gets ours."""
    os.environ.setdefault(name, value)
