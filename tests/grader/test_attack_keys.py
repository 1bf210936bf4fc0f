"""Hostile callers of the grading service (issue #26): the judge key the operator configured
for the judge's endpoint goes to that endpoint and nowhere else, even when a ``/grade``
request picks another endpoint the operator allows."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from atoll.llm.endpoints import forget_trusted_endpoints
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig
from grader.service import create_app
from tests.grader import factories as f

MET = {"content": json.dumps({"rationale": "ok", "verdict": "met"})}
JUDGE_KEY = "sk-JUDGE-PROXY-CANARY-0001"


@pytest.fixture
def endpoints(monkeypatch):
    """The judge's own endpoint (its key is for it) and another the operator lets requests pick."""
    forget_trusted_endpoints()
    for name in ("ATOLL_KEY_ENDPOINTS", "ATOLL_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATOLL_TEST_JUDGE_KEY", JUDGE_KEY)
    with ScriptedLLM([MET] * 4) as own, ScriptedLLM([MET] * 4) as other:
        yield own, other
    forget_trusted_endpoints()


def _serve(app):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _grade(url, tmp_path, judge_request):
    task = f.task([{"verifier_id": "v1", "criteria": "a.txt says b"}])
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "b"})
    with before.open("rb") as b, after.open("rb") as a:
        return httpx.post(
            f"{url}/grade",
            data={"task": task.model_dump_json(), "judge": json.dumps(judge_request)},
            files={"before": b, "after": a},
            timeout=60,
        )


@pytest.mark.parametrize("key_setting", ["api_key_env", "api_key"])
def test_the_judges_key_stays_with_the_judges_endpoint(endpoints, tmp_path, key_setting):
    own, other = endpoints
    key = {"api_key_env": "ATOLL_TEST_JUDGE_KEY"} if key_setting == "api_key_env" else {"api_key": JUDGE_KEY}
    judge = JudgeConfig(model="openai/judge", api_base=own.api_base, **key)
    server, thread, url = _serve(create_app(judge, allowed_api_bases=[other.api_base]))
    try:
        # The operator's own endpoint gets the operator's key.
        assert _grade(url, tmp_path, {}).status_code == 200
        assert own.request_headers[-1]["authorization"] == f"Bearer {JUDGE_KEY}"
        # Another allowed endpoint is served, but never with the key meant for the judge's.
        answer = _grade(url, tmp_path, {"api_base": other.api_base})
        assert answer.status_code == 200, answer.text
        assert other.requests, "the allowed endpoint was not called"
        sent = [headers.get("authorization", "") for headers in other.request_headers]
        assert not any(JUDGE_KEY in value for value in sent), sent
    finally:
        server.should_exit = True
        thread.join(10)
