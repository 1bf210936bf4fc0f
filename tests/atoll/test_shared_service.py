"""Every service that accepts work needs a token beyond loopback, reads generated token files,
and bounds the bodies it accepts."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from atoll.service_tokens import load_token_dir, write_token_files

SERVICES = {  # command, the variable its token is read from
    "orchestrator": (["orchestrator", "serve"], "ATOLL_API_TOKEN"),
    "agent": (["agent", "serve"], "ATOLL_AGENT_TOKEN"),
    "grade": (["grade", "serve"], "ATOLL_GRADER_TOKEN"),
    "env": (["env", "serve"], "ATOLL_ENV_TOKEN"),
}
_TOKENS = {variable for _, variable in SERVICES.values()} | {"ATOLL_TOKEN_DIR", "ATOLL_VIEW_TOKEN"}


def _env(tmp_path, **extra) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _TOKENS}
    env.update(
        ATOLL_FS_ROOT=str(tmp_path / "fs"),
        ATOLL_APPS_DATA_ROOT=str(tmp_path / "apps"),
        ATOLL_STORE=f"sqlite:///{tmp_path / 'store.db'}",
        PYTHONPATH=os.getcwd(),
        **extra,
    )
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _atoll(args, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_refuses_to_start_beyond_loopback_without_its_token(service, tmp_path):
    command, variable = SERVICES[service]
    result = _atoll([*command, "--host", "0.0.0.0", "--port", str(_free_port())], _env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: refusing to serve on 0.0.0.0 without a token: set {variable} (or bind 127.0.0.1)\n"
    )


@pytest.mark.parametrize("service", ["orchestrator", "grade"])
def test_a_token_set_but_empty_is_an_error_not_no_token(service, tmp_path):
    command, variable = SERVICES[service]
    result = _atoll([*command, "--port", str(_free_port())], _env(tmp_path, **{variable: " "}))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and f"{variable} is set but empty" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_service_reads_its_generated_token_file_and_then_serves_beyond_loopback(tmp_path):
    tokens = tmp_path / "tokens"
    write_token_files([str(tokens / "api" / "ATOLL_API_TOKEN")])
    token = (tokens / "api" / "ATOLL_API_TOKEN").read_text().strip()
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atoll_cli",
            "orchestrator",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=_env(tmp_path, ATOLL_TOKEN_DIR=str(tokens)),
    )
    try:
        ready, _, _ = select.select([process.stderr], [], [], 90)
        assert ready and process.stderr.readline() == f"orchestrator listening on http://0.0.0.0:{port}\n"
        import httpx

        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.get("/runs").status_code == 401
            assert client.get("/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_token_files_are_generated_once_kept_and_overridden_by_the_operator(tmp_path, monkeypatch):
    monkeypatch.delenv("ATOLL_API_TOKEN", raising=False)
    monkeypatch.delenv("ATOLL_GRADER_TOKEN", raising=False)
    api, grader = tmp_path / "api" / "ATOLL_API_TOKEN", tmp_path / "grader" / "ATOLL_GRADER_TOKEN"
    assert write_token_files([str(api), str(grader)]) == [
        "ATOLL_API_TOKEN: generated",
        "ATOLL_GRADER_TOKEN: generated",
    ]
    first = api.read_text().strip()
    assert len(first) >= 40 and first != grader.read_text().strip()
    assert write_token_files([str(api)]) == ["ATOLL_API_TOKEN: kept"]
    assert api.read_text().strip() == first
    monkeypatch.setenv("ATOLL_API_TOKEN", "operator-chosen")
    assert write_token_files([str(api)]) == ["ATOLL_API_TOKEN: from the environment"]
    assert api.read_text().strip() == "operator-chosen"
    with pytest.raises(ValueError, match="named after its variable"):
        write_token_files([str(tmp_path / "token.txt")])


def test_loading_token_files_sets_only_unset_token_variables(tmp_path, monkeypatch):
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "ATOLL_API_TOKEN").write_text("from-file\n")
    (tmp_path / "ATOLL_AGENT_TOKEN").write_text("agent-file")
    (tmp_path / "OPENAI_API_KEY").write_text("not a token file")
    (tmp_path / "ATOLL_GRADER_TOKEN").symlink_to(tmp_path / "api" / "ATOLL_API_TOKEN")
    for name in ("ATOLL_API_TOKEN", "ATOLL_GRADER_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "")  # recorded, so that what the loader sets is undone after
        monkeypatch.delenv(name)
    monkeypatch.setenv("ATOLL_AGENT_TOKEN", "operator")
    assert load_token_dir(tmp_path) == ["ATOLL_API_TOKEN"]
    assert os.environ["ATOLL_API_TOKEN"] == "from-file" and os.environ["ATOLL_AGENT_TOKEN"] == "operator"
    assert "OPENAI_API_KEY" not in os.environ and "ATOLL_GRADER_TOKEN" not in os.environ
    assert load_token_dir(tmp_path / "missing") == []


def test_the_grader_needs_its_token_for_grade():
    from grader.service import create_app

    with TestClient(create_app(token="grader-secret")) as client:
        assert client.get("/health").status_code == 200
        refused = client.post("/grade", data={"task": "{}"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        wrong = client.post("/grade", data={"task": "{}"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        allowed = client.post(
            "/grade", data={"task": "{}"}, headers={"Authorization": "Bearer grader-secret"}
        )
        assert allowed.status_code == 422  # past the token: the missing files are the problem now


def _grader(limit):
    from grader.service import create_app

    return create_app(max_body_bytes=limit)


def _agents_runner(limit):
    from agents_runner.service import create_app
    from agents_runner.settings import AgentRunnerSettings

    return create_app(AgentRunnerSettings(max_body_bytes=limit))


@pytest.mark.parametrize(
    ("make_app", "route", "content_type"),
    [(_grader, "/grade", "multipart/form-data; boundary=b"), (_agents_runner, "/runs", "application/json")],
)
def test_the_grader_and_the_agents_runner_bound_their_bodies(make_app, route, content_type):
    headers = {"Content-Type": content_type}
    with TestClient(make_app(4096)) as client:
        declared = client.post(route, content=b"x" * 5000, headers=headers)
        assert declared.status_code == 413
        assert declared.json()["error"] == {
            "code": "too_large",
            "message": "request body of 5000 bytes is larger than this service's limit of 4096 bytes",
        }
        # Without a Content-Length (chunked), the bytes are counted as they arrive.
        streamed = client.post(route, content=(b"x" * 1024 for _ in range(8)), headers=headers)
        assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "too_large"
        small = client.post(route, content=(b"x" * 1024 for _ in range(2)), headers=headers)
        assert 400 <= small.status_code < 500 and small.status_code != 413  # read, and found wanting


def test_the_default_limits_are_set():
    from agents_runner.settings import AgentRunnerSettings
    from grader.settings import GraderSettings
    from orchestrator.api import ApiSettings

    assert ApiSettings().max_body_bytes == 1024**2
    assert AgentRunnerSettings().max_body_bytes == 1024**2
    assert GraderSettings().max_body_bytes == 4 * 1024**3
