"""The services' OpenAPI documents in docs/schemas/openapi/ are what the apps serve, and every
reply they declare is a typed model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from atoll_cli.commands.openapi import SERVICES, openapi_text, render_openapi, service_app

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schemas"
REGENERATE = "run: python -m atoll_cli.commands.openapi docs/schemas"


def test_committed_openapi_documents_are_current():
    rendered = render_openapi()
    committed = {
        path.relative_to(SCHEMA_DIR).as_posix(): path.read_text(encoding="utf-8")
        for path in (SCHEMA_DIR / "openapi").glob("*.json")
    }
    stale = sorted(name for name in rendered if committed.get(name) != rendered[name])
    extra = sorted(set(committed) - set(rendered))
    assert not stale and not extra, (
        f"docs/schemas/openapi is out of date (stale: {stale}, extra: {extra}); {REGENERATE}"
    )


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_serves_its_committed_document(service):
    committed = (SCHEMA_DIR / "openapi" / f"{service}.json").read_text(encoding="utf-8")
    with service_app(service) as app:
        # The environment answers loopback Host names only (atoll.http_guard).
        served = TestClient(app, base_url="http://127.0.0.1").get("/openapi.json")
    assert served.status_code == 200, served.text
    assert openapi_text(served.json()) == committed, f"{service}: served /openapi.json differs; {REGENERATE}"


def test_the_mcp_endpoint_is_not_in_the_environment_document():
    # /mcp is MCP's JSON-RPC over Streamable HTTP (a protocol on one path), not REST: it is
    # left out of the document and of the property tests on purpose (docs/api.md).
    document = json.loads((SCHEMA_DIR / "openapi" / "environment.json").read_text(encoding="utf-8"))
    assert not [path for path in document["paths"] if path.startswith("/mcp")]
