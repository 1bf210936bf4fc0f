"""Fixtures for environment tests: settings on temp roots and a running environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, world_settings


@pytest.fixture
def settings(tmp_path: Path) -> EnvironmentSettings:
    return world_settings(tmp_path / "world")


@pytest.fixture
def env_server(settings: EnvironmentSettings) -> Iterator[EnvironmentServer]:
    with EnvironmentServer(settings, server_factory=make_test_server) as server:
        yield server


@pytest.fixture
def client(env_server: EnvironmentServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env_server.url, timeout=60) as http:
        yield http
