"""Hostile callers of the agents runner service (issue #26): however many runs a caller posts,
and however big, the service holds a bounded number of them and keeps answering."""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agents_runner.service import create_app
from agents_runner.settings import AgentRunnerSettings

from .conftest import ServedApp

HEADERS = {"Authorization": "Bearer svc"}


def _wait_finished(client: httpx.Client, run_ids: list[str], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    for run_id in run_ids:
        while client.get(f"/runs/{run_id}").json()["state"] != "finished":
            assert time.monotonic() < deadline, f"run {run_id} did not finish"
            time.sleep(0.05)


@pytest.fixture
def refusing_gateway():
    """A loopback port nothing listens on: a run fails at once, after parsing its request."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/mcp"


def test_finished_runs_do_not_keep_their_requests(refusing_gateway):
    """Each finished run used to keep its whole request (context, agent state) for as long as
    it was kept (1,000 runs by default): 16 posts of 0.9 MiB messages held ~20 MiB, 1,000
    posts ~1.3 GiB. Only the trajectory is kept now."""
    message = "x" * (900 * 1024)  # within the 1 MiB body limit
    served = ServedApp(create_app(AgentRunnerSettings(), token="svc"))
    base = f"http://127.0.0.1:{served.port}"
    with served, httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        body = {"model": "openai/x", "gateway_url": refusing_gateway, "prompt": "warm up"}
        _wait_finished(client, [client.post("/runs", json=body).json()["run_id"]])  # warm up
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            run_ids = []
            for index in range(16):
                body = {"model": "openai/x", "gateway_url": refusing_gateway}
                body["initial_messages"] = [{"role": "user", "content": f"{index}{message}"}]
                answer = client.post("/runs", json=body)
                assert answer.status_code == 202, answer.text
                run_ids.append(answer.json()["run_id"])
            _wait_finished(client, run_ids)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert client.get(f"/runs/{run_ids[0]}").json()["status"] == "error"
        assert client.get(f"/runs/{run_ids[-1]}/trajectory").status_code == 200
    assert held < 8 * 1024**2, f"{held / 1024**2:.0f} MiB held after 16 finished runs of 0.9 MiB"


def test_running_runs_are_bounded_and_health_answers():
    """Runs whose gateway never answers stay running: without a limit every post added one."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts connections, never answers
    gateway = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
    settings = AgentRunnerSettings(max_running=2)
    try:
        with ServedApp(create_app(settings, token="svc")) as served:
            base = f"http://127.0.0.1:{served.port}"
            with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
                body = {"model": "openai/x", "gateway_url": gateway, "prompt": "hi", "timeout_s": 3}
                first = [client.post("/runs", json=body) for _ in range(2)]
                assert [answer.status_code for answer in first] == [202, 202]
                refused = client.post("/runs", json=body)
                assert refused.status_code == 429, refused.text
                assert refused.json()["error"]["code"] == "too_many_runs"
                assert "ATOLL_AGENT_MAX_RUNNING" in refused.json()["error"]["message"]
                assert httpx.get(f"{base}/health", timeout=1).status_code == 200
                _wait_finished(client, [answer.json()["run_id"] for answer in first])
                assert client.post("/runs", json=body).status_code == 202  # room again
    finally:
        silent.close()


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "text/event-stream"])
def test_a_gateway_url_is_no_window_on_internal_services(content_type):
    """``gateway_url`` is the caller's: pointed at an internal HTTP service, the runner's error
    quoted its reply (pydantic's ``input_value={…}``) in the trajectory the caller reads."""
    secret = "ASIA7CANARY31"  # short: pydantic quotes short values whole, long ones cut

    class Internal(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"AccessKeyId": secret}).encode()
            if content_type == "text/event-stream":
                body = b"event: message\ndata: " + body + b"\n\n"
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

    internal = ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    try:
        served = ServedApp(create_app(AgentRunnerSettings(), token="svc"))
        base = f"http://127.0.0.1:{served.port}"
        with served, httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
            gateway = f"http://127.0.0.1:{internal.server_port}/latest/meta-data/credentials"
            started = client.post("/runs", json={"model": "openai/x", "gateway_url": gateway, "prompt": "hi"})
            run_id = started.json()["run_id"]
            _wait_finished(client, [run_id])
            seen = client.get(f"/runs/{run_id}/trajectory").text + client.get(f"/runs/{run_id}").text
    finally:
        internal.shutdown()
    assert "cannot connect to MCP gateway" in seen
    assert secret not in seen


async def test_the_orchestrator_waits_for_a_runner_at_its_limit(gateway):
    """A runner at ATOLL_AGENT_MAX_RUNNING answers 429; the orchestrator's remote agent step
    asks again until a slot is free instead of failing the trial as an infrastructure error."""
    from atoll.benchmark import ReferenceSolution, Task
    from atoll.trial import TrialSpec
    from orchestrator.executors.agent_runs import run_agent_remote
    from orchestrator.executors.steps import EnvironmentEndpoint

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    served = ServedApp(create_app(AgentRunnerSettings(max_running=1), token="svc"))
    base = f"http://127.0.0.1:{served.port}"
    task = Task.model_validate(
        {"task_id": "t1", "world_id": "w", "prompt": "p", "rubric": [{"verifier_id": "v", "criteria": "c"}]}
    ).model_copy(update={"reference_solution": ReferenceSolution(final_answer="done")})
    spec = TrialSpec(experiment="e", task_id="t1", world_id="w", world_digest="d", agent_name="oracle",
                     agent="replay", model="replay", run_index=0)  # fmt: skip
    try:
        with served:
            async with httpx.AsyncClient(timeout=30) as http:
                busy = {"model": "openai/x", "prompt": "hi", "timeout_s": 2,
                        "gateway_url": f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"}  # fmt: skip
                held = await http.post(f"{base}/runs", json=busy, headers=HEADERS)
                assert held.status_code == 202
                environment = EnvironmentEndpoint(
                    url=gateway.url.removesuffix("/mcp"), mcp_token=gateway.token
                )
                started = time.monotonic()
                trajectory = await run_agent_remote(
                    http, base, environment, task, spec, token="svc", poll_s=0.2, busy_wait_s=30
                )
        assert trajectory.final_answer == "done"
        assert time.monotonic() - started > 1  # it waited for the held slot
    finally:
        silent.close()


def test_a_runner_with_a_gateway_allow_list_never_connects_elsewhere():
    """With ATOLL_AGENT_GATEWAY_ALLOW set (compose sets its environment's /mcp), a run whose
    gateway_url is anywhere else — another host, another port, a path beside it, a look-alike
    with user info or dot segments — is refused before anything connects; one under it runs."""
    hits: list[str] = []

    class Internal(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            hits.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

    internal = ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    port = internal.server_port
    try:
        settings = AgentRunnerSettings(gateway_allow=f"http://127.0.0.1:{port}/world")
        served = ServedApp(create_app(settings, token="svc"))
        base = f"http://127.0.0.1:{served.port}"
        refused = [
            f"http://127.0.0.1:{port}/latest/meta-data/credentials",
            f"http://127.0.0.1:{port}/worldly/mcp",
            f"http://127.0.0.1:{port}/world/../admin",
            f"http://127.0.0.1:{port}/world/%2e%2e/admin",
            f"http://127.0.0.1@127.0.0.1:{port}/world/mcp",
            f"http://localhost:{port}/world/mcp",
            f"https://127.0.0.1:{port}/world/mcp",
        ]
        with served, httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
            for gateway in refused:
                answer = client.post(
                    "/runs", json={"model": "openai/x", "gateway_url": gateway, "prompt": "hi"}
                )
                assert answer.status_code == 400, (gateway, answer.text)
                assert answer.json()["error"]["code"] == "gateway_not_allowed"
            assert hits == []  # nothing was connected to
            allowed = f"http://127.0.0.1:{port}/world/mcp"
            started = client.post("/runs", json={"model": "openai/x", "gateway_url": allowed, "prompt": "hi"})
            assert started.status_code == 202, started.text
            _wait_finished(client, [started.json()["run_id"]])
    finally:
        internal.shutdown()
    assert hits and all(path.startswith("/world/mcp") for path in hits)
