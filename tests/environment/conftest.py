"""Fixtures for environment tests: settings on temp roots and a running environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server


@pytest.fixture
def settings(tmp_path: Path) -> EnvironmentSettings:
    return EnvironmentSettings(
        fs_root=tmp_path / "world" / "filesystem",
        apps_data_root=tmp_path / "world" / ".apps_data",
        json_logs=False,
        log_level="WARNING",
        ready_timeout_s=20,
        drain_timeout_s=10,
        preload_servers=False,
    )


@pytest.fixture
def env_server(settings: EnvironmentSettings) -> Iterator[EnvironmentServer]:
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        yield server


@pytest.fixture
def client(env_server: EnvironmentServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env_server.url, timeout=60) as http:
        yield http
