"""The agents runner's HTTP API against its published OpenAPI document, by schemathesis
(tests/api_properties.py): no 5xx, replies as declared, forbidden requests refused."""

from __future__ import annotations

import pytest

from agents_runner.service import create_app
from agents_runner.settings import AgentRunnerSettings
from tests.api_properties import bearer, exercise, operations, published_schema
from tests.served_app import ServedApp

TOKEN = "runner-property-token"
# Runs may only reach a closed loopback port: a generated run never leaves the machine.
GATEWAY = "http://127.0.0.1:9/mcp"


@pytest.fixture(scope="module")
def served_runner():
    settings = AgentRunnerSettings(token=TOKEN, gateway_allow=GATEWAY, max_running=4)
    with ServedApp(create_app(settings)) as served:
        yield served


schema = published_schema("agents_runner")


@pytest.mark.parametrize("operation", operations(schema))
def test_the_runner_keeps_its_published_contract(operation, served_runner):
    exercise(operation, served_runner.url, bearer(TOKEN))
