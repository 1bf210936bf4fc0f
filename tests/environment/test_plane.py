"""The MCP plane is built in the background: the service answers meanwhile, and what needs the
plane waits for it, or is told plainly why it is not there (environment/plane.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastmcp import Client

from environment import EnvironmentServer, create_app
from environment.plane import McpPlane
from tests.environment.factories import initialize_message, make_test_server, tar_gz, world_settings
from tests.fresh_interpreter import run_fresh

ECHO_APPS = {"mcpServers": {"files": {"transport": "inprocess", "server": "files"}}}
MACHINERY = ("fastmcp", "mcp", "mcp_types")


@contextmanager
def serving(app: object) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port, without waiting for its MCP plane (which
    :class:`EnvironmentServer` does); yields the base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on", ws="none")  # type: ignore[arg-type]
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the environment did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def held_build(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The plane's build waits for the event returned (set at teardown at the latest)."""
    gate = threading.Event()
    build = McpPlane._build

    def held(self: McpPlane):  # type: ignore[no-untyped-def]
        gate.wait(60)
        return build(self)

    monkeypatch.setattr(McpPlane, "_build", held)
    yield gate
    gate.set()


def _failing_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: McpPlane) -> None:
        raise RuntimeError("fastmcp is broken in this install")

    monkeypatch.setattr(McpPlane, "_build", broken)


@contextmanager
def failed_plane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[object, str]]:
    """An environment served whose MCP plane failed to build: (its app, its base URL)."""
    _failing_build(monkeypatch)
    app = create_app(world_settings(tmp_path / "world"), server_factory=make_test_server)
    with serving(app) as url:
        assert app.state.plane.wait_ready(30) is False
        yield app, url


def _in_thread(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, list[httpx.Response]]:
    replies: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: replies.append(call()), daemon=True)
    thread.start()
    return thread, replies


def test_health_and_populate_answer_while_the_plane_is_built_and_apps_and_mcp_wait_for_it(
    tmp_path: Path, held_build: threading.Event
) -> None:
    settings = world_settings(tmp_path / "world")
    app = create_app(settings, server_factory=make_test_server)
    with serving(app) as url:
        health = httpx.get(f"{url}/health").json()
        assert health["status"] == "ok" and health["mcp_ready"] is False
        # the data plane needs no MCP plane: a world is populated meanwhile
        archive = tar_gz([("Reports/q3.txt", b"Q3 revenue: 4.2M")])
        populated = httpx.post(f"{url}/data/populate", files={"archive": ("w.tar.gz", archive)}, timeout=30)
        assert populated.status_code == 200, populated.text
        assert (settings.fs_root / "Reports" / "q3.txt").read_bytes() == b"Q3 revenue: 4.2M"
        # /apps and /mcp wait for the plane instead of failing
        apps, apps_reply = _in_thread(lambda: httpx.post(f"{url}/apps", json=ECHO_APPS, timeout=60))
        listed, listed_reply = _in_thread(
            lambda: httpx.post(
                f"{url}/mcp",
                json=initialize_message(),
                headers={"accept": "application/json, text/event-stream"},
                timeout=60,
            )
        )
        time.sleep(0.5)
        assert apps.is_alive() and listed.is_alive()  # still waiting: nothing was refused
        held_build.set()
        apps.join(60)
        listed.join(60)
        assert apps_reply[0].status_code == 200, apps_reply[0].text
        assert "files_list_root" in apps_reply[0].json()["tools"]
        assert listed_reply[0].status_code == 200, listed_reply[0].text
        assert listed_reply[0].json()["result"]["serverInfo"]["name"] == "atoll-environment"
        assert httpx.get(f"{url}/health").json()["mcp_ready"] is True

        async def call() -> str:
            async with Client(f"{url}/mcp") as mcp:
                result = await mcp.call_tool("files_list_root", {})
                return str(result.content)

        import asyncio

        assert "Reports" in asyncio.run(call())  # the world populated before the plane was up


def test_apps_validates_server_options_only_once_the_plane_and_its_preload_are_up(
    tmp_path: Path, held_build: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checking an in-process server's options imports its module: done while the plane's
    # preload imports the same modules on its own thread, that was two imports at once, the
    # one on the event loop. /apps waits for the plane before its body is validated.
    import environment.config as config_module

    app = create_app(world_settings(tmp_path / "world"), server_factory=make_test_server)
    validated_when_ready: list[bool] = []
    validate = config_module._validated_options

    def recording(server: str, options: dict) -> dict:
        validated_when_ready.append(app.state.plane.ready)
        return validate(server, options)

    monkeypatch.setattr(config_module, "_validated_options", recording)
    with serving(app) as url:
        apps, reply = _in_thread(lambda: httpx.post(f"{url}/apps", json=ECHO_APPS, timeout=60))
        time.sleep(0.5)
        assert validated_when_ready == []  # the body waits with the request
        held_build.set()
        apps.join(60)
        assert reply[0].status_code == 200, reply[0].text
        # Every check of the options (the strict-JSON check of the body, then the route's own
        # parse) ran once the plane was up, none before.
        assert validated_when_ready and all(validated_when_ready), validated_when_ready


def test_a_plane_that_fails_to_build_makes_health_apps_and_mcp_answer_503_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with failed_plane(tmp_path, monkeypatch) as (app, url):
        for reply in (
            httpx.get(f"{url}/health"),
            httpx.post(f"{url}/apps", json=ECHO_APPS),
            httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        ):
            assert reply.status_code == 503, reply.text
            error = reply.json()["error"]
            assert error["code"] == "mcp_unavailable"
            assert "the MCP gateway failed to start" in error["message"]
            assert "fastmcp is broken in this install" in error["message"]
        assert httpx.get(f"{url}/").status_code == 200  # the service itself still answers


def test_an_embedded_environment_whose_plane_fails_raises_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_build(monkeypatch)
    with pytest.raises(
        RuntimeError, match="the MCP gateway failed to start: RuntimeError: fastmcp is broken"
    ):
        EnvironmentServer(world_settings(tmp_path / "world"), server_factory=make_test_server).start()


def test_waiting_for_the_plane_is_bounded_by_the_ready_timeout(
    tmp_path: Path, held_build: threading.Event
) -> None:
    app = create_app(world_settings(tmp_path / "world", ready_timeout_s=0.5), server_factory=make_test_server)
    with serving(app) as url:
        started = time.monotonic()
        reply = httpx.post(f"{url}/apps", json=ECHO_APPS, timeout=30)
        assert reply.status_code == 503
        assert reply.json()["error"]["code"] == "mcp_unavailable"
        assert "not ready within 0.5 s" in reply.json()["error"]["message"]
        assert time.monotonic() - started < 10
        held_build.set()
        assert app.state.plane.wait_ready(30)
        assert httpx.post(f"{url}/apps", json=ECHO_APPS, timeout=30).status_code == 200


def test_without_a_lifespan_mcp_is_refused_plainly_not_hung(tmp_path: Path) -> None:
    # an embedding that serves the app with its lifespan off never builds the plane
    import asyncio

    app = create_app(world_settings(tmp_path / "world"), server_factory=make_test_server)

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # runs no lifespan
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})

    reply = asyncio.run(asyncio.wait_for(post(), 10))
    assert reply.status_code == 503
    assert "lifespan has not started" in reply.json()["error"]["message"]


_PROBE = """
import json, sys, tempfile
from pathlib import Path

machinery = %(machinery)r
import environment
from environment import EnvironmentServer, EnvironmentSettings, create_app

root = Path(tempfile.mkdtemp())
settings = EnvironmentSettings(fs_root=root / "fs", apps_data_root=root / "apps", preload_servers=False)
report = {"after_import": [m for m in machinery if m in sys.modules]}
# populate and snapshot need only the descriptor layer of the servers' foundation
report["definitions_after_import"] = [m for m in ("mcp_servers._core.definition", "mcp_servers._core.results") if m in sys.modules]
create_app(settings)
report["after_create_app"] = [m for m in machinery if m in sys.modules]
import httpx
with EnvironmentServer(settings) as env:
    config = {"mcpServers": {"filesystem": {"transport": "inprocess", "server": "filesystem"}}}
    report["apps"] = httpx.post(env.url + "/apps", json=config, timeout=120).status_code
report["after_serving"] = [m for m in machinery if m in sys.modules]
print(json.dumps(report))
"""


def test_importing_the_environment_and_building_its_app_import_no_mcp_machinery() -> None:
    # fastmcp's server and the MCP SDK are ~0.5 s of CPU: they come with the plane's build
    report, _ = run_fresh(_PROBE % {"machinery": MACHINERY}, env={"ATOLL_LOG_LEVEL": "WARNING"})
    assert report["after_import"] == []
    assert report["definitions_after_import"] == []
    assert report["after_create_app"] == []
    assert report["apps"] == 200
    assert report["after_serving"] == list(MACHINERY)


def test_a_request_to_mcp_without_its_token_is_refused_at_once_while_the_plane_is_built(
    tmp_path: Path, held_build: threading.Event
) -> None:
    settings = world_settings(tmp_path / "world", mcp_token="mcp-secret")
    app = create_app(settings, server_factory=make_test_server)
    with serving(app) as url:
        started = time.monotonic()
        reply = httpx.post(f"{url}/mcp", json=initialize_message(), timeout=30)
        assert reply.status_code == 401 and reply.json()["error"]["code"] == "unauthorized"
        assert time.monotonic() - started < 5  # not held until the plane is up
        assert app.state.plane.ready is False
        held_build.set()
        assert app.state.plane.wait_ready(30)
        assert httpx.post(f"{url}/mcp", json=initialize_message(), timeout=30).status_code == 401


def test_a_shutdown_while_the_plane_is_built_starts_nothing_and_later_requests_get_503(
    tmp_path: Path, held_build: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    from environment.gateway import GatewayManager

    entered: list[bool] = []
    enter = GatewayManager.__aenter__

    async def counted(self: GatewayManager) -> GatewayManager:
        entered.append(True)
        return await enter(self)

    monkeypatch.setattr(GatewayManager, "__aenter__", counted)
    app = create_app(world_settings(tmp_path / "world"), server_factory=make_test_server)
    with serving(app):
        threading.Timer(0.3, held_build.set).start()  # the build ends after the shutdown began
    plane = app.state.plane
    assert entered == [] and plane.ready is False
    assert "shutting down" in (plane.error or "")

    async def after() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return [await client.post("/mcp", json=initialize_message()), await client.get("/apps")]

    import asyncio

    for reply in asyncio.run(after()):
        assert reply.status_code == 503 and reply.json()["error"]["code"] == "mcp_unavailable"


def test_a_plane_that_stopped_answers_503_not_a_stale_gateway(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    app = create_app(world_settings(tmp_path / "world"), server_factory=make_test_server)
    with TestClient(app) as client:
        assert app.state.plane.wait_ready(30)
        assert client.post("/apps", json=ECHO_APPS).status_code == 200
    # the lifespan has ended: the gateway it served is closed
    import asyncio

    async def after() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.get("/apps")

    reply = asyncio.run(after())
    assert reply.status_code == 503 and "has stopped" in reply.json()["error"]["message"]


def test_a_failed_build_ends_the_deferral_of_full_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # atoll env serve defers full collections until the start-up freeze; a plane that fails to
    # build never freezes, so it must bring them back itself
    import gc

    from fastapi.testclient import TestClient

    from atoll.runtime import defer_full_collections

    _failing_build(monkeypatch)
    threshold = gc.get_threshold()
    try:
        defer_full_collections()
        assert gc.get_threshold()[2] > 1_000_000
        app = create_app(
            world_settings(tmp_path / "world"), server_factory=make_test_server, freeze_heap=True
        )
        with TestClient(app):
            assert app.state.plane.wait_ready(30) is False
            assert gc.get_threshold() == threshold
    finally:
        gc.set_threshold(*threshold)


_FAILED_PRELOAD_PROBE = """
import json, tempfile
from pathlib import Path

import httpx

def no_scratch(*args, **kwargs):
    raise OSError(28, "No space left on device")

tempfile.TemporaryDirectory = no_scratch  # the preload's scratch world cannot be made
from environment import EnvironmentServer, EnvironmentSettings

root = Path(tempfile.mkdtemp())
settings = EnvironmentSettings(fs_root=root / "fs", apps_data_root=root / "apps", preload_servers=True)
report = {}
with EnvironmentServer(settings) as env:
    import time

    deadline = time.monotonic() + 120
    while not httpx.get(env.url + "/health").json()["servers_preloaded"] and time.monotonic() < deadline:
        time.sleep(0.05)
    health = httpx.get(env.url + "/health")
    report["health"] = [health.status_code, health.json().get("mcp_ready")]
    config = {"mcpServers": {"filesystem": {"transport": "inprocess", "server": "filesystem"}}}
    report["apps"] = httpx.post(env.url + "/apps", json=config, timeout=120).status_code
print(json.dumps(report))
"""


def test_a_preload_that_fails_is_only_a_lost_speed_up() -> None:
    # a preload is a speed-up: /health stays 200, /apps builds its servers itself (and does not
    # wait for ever on a preload that never finished)
    report, _ = run_fresh(_FAILED_PRELOAD_PROBE, env={"ATOLL_LOG_LEVEL": "ERROR"})
    assert report == {"health": [200, True], "apps": 200}


def test_the_orchestrator_stops_waiting_at_once_for_an_environment_whose_gateway_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its /health answers 503 mcp_unavailable for good: polling on for minutes helps nobody,
    # and the trial's infra error names the cause
    import asyncio

    from orchestrator.executors.base import InfraError
    from orchestrator.executors.steps import wait_until_healthy

    with failed_plane(tmp_path, monkeypatch) as (_, url):

        async def wait() -> None:
            async with httpx.AsyncClient() as http:
                await wait_until_healthy(http, url, timeout_s=60)

        started = time.monotonic()
        with pytest.raises(
            InfraError, match="HTTP 503: the MCP gateway failed to start: RuntimeError: fastmcp is broken"
        ):
            asyncio.run(wait())
        assert time.monotonic() - started < 10
