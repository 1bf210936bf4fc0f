"""The agents runner service's ``POST /runs`` never lets a caller send the service's key
elsewhere: an endpoint off the list, an inline key or a routing argument is refused (400,
naming the field) before the run starts, and the submitter's server hears nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agents_runner.service import create_app
from agents_runner.settings import AgentRunnerSettings
from atoll.llm.endpoints import forget_trusted_endpoints
from atoll.testing.scripted_llm import ScriptedLLM


@pytest.fixture
def submitter(monkeypatch):
    forget_trusted_endpoints()
    for name in ("ATOLL_KEY_ENDPOINTS", "ATOLL_API_BASE", "ATOLL_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-CANARY")
    with ScriptedLLM([{"content": "hi"}] * 5) as llm:
        yield llm


@pytest.mark.parametrize(
    "fields, named",
    [
        (lambda evil: {"api_base": evil}, "field api_base"),
        (lambda evil: {"config": {"api_base": evil}}, "field config.api_base"),
        (lambda evil: {"api_base": evil, "api_key": "sk-inline"}, "field api_key"),
        (lambda evil: {"api_base": evil, "api_key_secret": "NOPE"}, "field api_key_secret"),
        (
            lambda evil: {"config": {"extra_args": {"fallbacks": [{"api_base": evil}]}}},
            "extra_args.fallbacks",
        ),
        (lambda evil: {"config": {"extra_args": {"base_url": evil}}}, "extra_args.base_url"),
    ],
    ids=["api_base", "config.api_base", "inline key", "unknown secret", "fallbacks", "base_url"],
)
def test_a_run_that_would_move_the_services_key_is_refused(submitter, fields, named):
    body = {
        "model": "openai/x",
        "gateway_url": "http://127.0.0.1:9/mcp",
        "prompt": "hi",
        **fields(submitter.api_base),
    }
    with TestClient(create_app(AgentRunnerSettings(), token="svc")) as client:
        answer = client.post("/runs", json=body, headers={"Authorization": "Bearer svc"})
    assert answer.status_code in (400, 422), answer.text
    assert named in answer.text and "sk-inline" not in answer.text
    assert submitter.requests == []


def test_a_secret_provisioned_for_the_callers_endpoint_is_accepted(submitter, monkeypatch):
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A", "sk-team-a")
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", submitter.api_base)
    body = {"model": "openai/x", "api_base": submitter.api_base, "api_key_secret": "TEAM_A", "prompt": "hi",
            "gateway_url": "http://127.0.0.1:9/mcp"}  # fmt: skip
    with TestClient(create_app(AgentRunnerSettings(), token="svc")) as client:
        answer = client.post("/runs", json=body, headers={"Authorization": "Bearer svc"})
    assert answer.status_code == 202, answer.text
