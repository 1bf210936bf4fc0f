"""``POST /runs`` accepts only experiments whose endpoints the service's keys may go to:
a submitter's own ``api_base`` is refused naming the field, unless it brings the name of a
secret the operator provisioned for exactly that endpoint (atoll.llm.admission)."""

from __future__ import annotations

import pytest
import yaml
from fastapi.testclient import TestClient

from atoll.llm.endpoints import forget_trusted_endpoints
from orchestrator.api import ApiSettings, create_app
from tests.atoll.factories import make_task, write_benchmark

EVIL = "http://127.0.0.1:9/v1"


@pytest.fixture
def client(tmp_path, monkeypatch):
    forget_trusted_endpoints()
    for name in ("ATOLL_KEY_ENDPOINTS", "ATOLL_API_BASE", "ATOLL_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-CANARY")
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path),
    )
    bench = write_benchmark(tmp_path / "bench", tasks=[make_task("t0")])
    with TestClient(create_app(settings)) as client:
        client.bench = bench
        yield client


def post(client, agent: dict | None = None, judge: dict | None = None, *, name: str = "keys"):
    spec = {
        "name": name,
        "benchmark": str(client.bench),
        "executor": "instant",
        "agents": [{"name": "a", "agent": "react_toolbelt", "model": "openai/gpt-5", **(agent or {})}],
        "judge": judge or {},
    }
    return client.post("/runs", content=yaml.safe_dump(spec))


@pytest.mark.parametrize(
    "agent, judge, field",
    [
        ({"api_base": EVIL}, None, "agents[0].api_base"),
        ({"config": {"api_base": EVIL}}, None, "agents[0].config.api_base"),
        (None, {"model": "openai/judge", "api_base": EVIL}, "judge.api_base"),
        ({"api_base": "https://api.openai.com@127.0.0.1:9/v1"}, None, "agents[0].api_base"),
        ({"model": "anthropic/claude", "api_base": "https://api.openai.com/v1"}, None, "agents[0].api_base"),
        ({"api_base": EVIL, "api_key_secret": "NOPE"}, None, "agents[0].api_key_secret"),
        ({"api_key_secret": "TEAM_A"}, None, "agents[0].api_key_secret"),  # a secret needs its endpoint
        ({"api_base": "http://127.0.0.1:10/v1", "api_key_secret": "TEAM_A"}, None, "agents[0].api_base"),
        (
            {"extra_args": {"fallbacks": [{"model": "openai/x", "api_base": EVIL}]}},
            None,
            "agents[0].extra_args",
        ),
        (
            None,
            {"model": "openai/judge", "extra_args": {"fallbacks": [{"api_base": EVIL}]}},
            "judge.extra_args",
        ),
        ({"extra_args": {"api_key": "sk-inline"}}, None, "agents[0].extra_args.api_key"),
        ({"model": "huggingface/https://127.0.0.1:9/v1"}, None, "agents[0].model"),
    ],
)
def test_a_submitted_endpoint_off_the_list_is_refused_naming_the_field(
    client, monkeypatch, agent, judge, field
):
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A", "sk-team-a")
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", EVIL)
    answer = post(client, agent, judge)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "bad_experiment"
    assert field in answer.json()["error"]["message"]
    assert "sk-team-a" not in answer.text and "sk-inline" not in answer.text
    assert client.get("/runs").json()["runs"] == []  # nothing was stored


def test_listed_endpoints_and_provisioned_secrets_are_accepted(client, monkeypatch):
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A", "sk-team-a")
    monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", EVIL)
    assert post(client, {"api_base": "https://api.openai.com/v1"}).status_code == 202
    assert post(client, {"api_base": EVIL, "api_key_secret": "TEAM_A"}).status_code == 202
    monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", "openai=http://127.0.0.1:9")
    # Another run: a judge added to "keys" would be another judge for its recorded trials (409).
    assert post(client, None, {"model": "openai/judge", "api_base": EVIL}, name="judged").status_code == 202
