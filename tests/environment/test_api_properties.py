"""The environment's HTTP API against its published OpenAPI document, by schemathesis
(tests/api_properties.py): no 5xx, replies as declared, forbidden requests refused.

Temporary roots, both tokens, URLs allowed only under a temporary folder (a generated populate
source or snapshot destination never leaves the machine) and the test servers of
tests/environment/factories.py for ``inprocess`` entries. ``/apps`` bodies that would start a
child process or reach a URL (``stdio``, ``http``, ``sse``) are not sent: a generated command
line is not something to run. ``/mcp`` is not in the document (docs/api.md says why).
"""

from __future__ import annotations

from typing import Any

import pytest

from environment.app import create_app
from tests.api_properties import bearer, exercise, operations, published_schema
from tests.environment.factories import make_test_server, world_settings
from tests.served_app import ServedApp

TOKEN = "environment-property-token"
_REACHES_OUT = {"stdio", "http", "streamable-http", "sse"}


@pytest.fixture(scope="module")
def served_environment(tmp_path_factory):
    root = tmp_path_factory.mktemp("environment-api")
    (root / "sources").mkdir()
    settings = world_settings(
        root / "world",
        env_token=TOKEN,
        mcp_token=TOKEN,
        url_allow=(root / "sources").as_uri() + "/",
        snapshot_url_prefix=(root / "sources" / "snapshots").as_uri(),
        ready_timeout_s=20,
    )
    with ServedApp(create_app(settings, server_factory=make_test_server)) as served:
        yield served


schema = published_schema("environment")


@schema.hook
def filter_body(context: Any, body: Any) -> bool:
    if context.operation is None or context.operation.path != "/apps" or not isinstance(body, dict):
        return True
    servers = body.get("mcpServers")
    if not isinstance(servers, dict):
        return True
    for server in servers.values():
        if not isinstance(server, dict):
            continue
        transport = server.get("transport")
        if (isinstance(transport, str) and transport in _REACHES_OUT) or (
            transport is None and (server.get("command") or server.get("url"))
        ):
            return False
    return True


@pytest.mark.parametrize("operation", operations(schema))
def test_the_environment_keeps_its_published_contract(operation, served_environment):
    exercise(operation, served_environment.url, bearer(TOKEN))
