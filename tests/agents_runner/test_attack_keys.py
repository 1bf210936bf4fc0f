"""Hostile callers of the agents runner service (issue #26) against the key allow-lists: an
endpoint bound by a path prefix (a tenant's path on a shared gateway) keeps its key there."""

from __future__ import annotations

import time

import httpx
import pytest

from agents_runner.service import create_app
from agents_runner.settings import AgentRunnerSettings
from atoll.llm.endpoints import forget_trusted_endpoints
from atoll.testing.scripted_llm import ScriptedLLM

from .conftest import ServedApp

TEAM_KEY = "sk-TEAM-A-CANARY-0001"
SERVICE_KEY = "sk-SERVICE-CANARY-0001"


@pytest.fixture
def shared_gateway(monkeypatch):
    """One host serving several tenants by path (as hosted AI gateways do): team A's secret
    is bound to ``/team-a/v1``, and the service's OpenAI key to ``/service/v1``."""
    forget_trusted_endpoints()
    for name in ("ATOLL_API_BASE", "ATOLL_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedLLM([{"content": "hi"}] * 4) as gateway:
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A", TEAM_KEY)
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", f"{gateway.url}/team-a/v1")
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={gateway.url}/service/v1")
        monkeypatch.setenv("OPENAI_API_KEY", SERVICE_KEY)
        yield gateway


@pytest.mark.parametrize(
    ("fields", "climb"),
    [
        ({"api_key_secret": "TEAM_A"}, "/team-a/v1/../../team-b/v1"),
        ({"api_key_secret": "TEAM_A"}, "/team-a/v1/%2e%2e/%2e%2e/team-b/v1"),
        ({"api_key_secret": "TEAM_A"}, "/team-a/v1/..%2f..%2fteam-b/v1"),
        ({}, "/service/v1/../../team-b/v1"),
        ({}, "/service/v1/./../../team-b/v1"),
    ],
    ids=["secret dot-dot", "secret encoded dots", "secret encoded slash", "service key", "dot then dot-dot"],
)
def test_a_key_bound_to_a_path_is_not_sent_past_it(shared_gateway, gateway, fields, climb):
    """``/team-a/v1/../../team-b/v1`` starts with the bound path as written, but the HTTP
    client sends it as ``/team-b/v1``: team A's key (or the service's) went to another
    tenant's path. Such an endpoint is refused at acceptance now, and nothing is sent."""
    body = {
        "model": "openai/x",
        "api_base": shared_gateway.url + climb,
        "gateway_url": gateway.url,
        "gateway_token": gateway.token,
        "prompt": "hi",
        "agent": "loop",
        **fields,
    }
    served = ServedApp(create_app(AgentRunnerSettings(), token="svc"))
    base = f"http://127.0.0.1:{served.port}"
    with served, httpx.Client(base_url=base, headers={"Authorization": "Bearer svc"}, timeout=30) as client:
        answer = client.post("/runs", json=body)
        if answer.status_code == 202:  # accepted: let the run make its model call
            run = answer.json()["run_id"]
            deadline = time.monotonic() + 20
            while client.get(f"/runs/{run}").json()["state"] != "finished" and time.monotonic() < deadline:
                time.sleep(0.05)
    sent = [headers.get("authorization", "") for headers in shared_gateway.request_headers]
    assert not any(TEAM_KEY in value or SERVICE_KEY in value for value in sent), sent
    assert answer.status_code == 400, answer.text
    assert "api_base" in answer.json()["error"]["message"]
