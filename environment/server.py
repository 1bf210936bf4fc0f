"""Run an environment: in the foreground (``atoll env serve``) or in a background thread."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

import uvicorn

from atoll.http_guard import check_bind, guarded_protocol
from atoll.serving import serve_app
from environment.app import create_app
from environment.settings import EnvironmentSettings

if TYPE_CHECKING:
    from environment.gateway import ServerFactory


def _token(settings: EnvironmentSettings) -> str | None:
    return settings.env_token.get_secret_value() if settings.env_token else None


def _check_bind(settings: EnvironmentSettings, host: str) -> None:
    check_bind(host, _token(settings), "ATOLL_ENV_TOKEN")


def serve(settings: EnvironmentSettings, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until interrupted (blocking).

    Raises AtollError(``insecure_bind``) for a non-loopback ``host`` without ATOLL_ENV_TOKEN.
    """
    _check_bind(settings, host)
    app = create_app(settings, freeze_heap=True, bind_host=host)
    serve_app(
        app,
        service="environment",
        host=host,
        port=port,
        token=_token(settings),
        token_variable="ATOLL_ENV_TOKEN",
        json_logs=settings.json_logs,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        http=guarded_protocol(settings.header_timeout_s),
    )


class EnvironmentServer:
    """An environment on a free loopback port, served by uvicorn in a daemon thread.

    ``with EnvironmentServer(settings) as env: env.url, env.mcp_url``; entering returns once
    ``/mcp`` and ``/apps`` are served (the MCP plane built). Startup failures raise
    RuntimeError; leaving the block stops the server (and every MCP child process). A
    non-loopback ``host`` without ATOLL_ENV_TOKEN raises AtollError(``insecure_bind``).
    """

    def __init__(
        self,
        settings: EnvironmentSettings | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_factory: ServerFactory | None = None,
        startup_timeout_s: float = 30.0,
    ) -> None:
        self.settings = settings or EnvironmentSettings()
        _check_bind(self.settings, host)
        self.app = create_app(self.settings, server_factory=server_factory, bind_host=host)
        config = uvicorn.Config(
            self.app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            ws="none",
            http=guarded_protocol(self.settings.header_timeout_s),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="atoll-environment", daemon=True)
        self._startup_timeout_s = startup_timeout_s
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def start(self) -> EnvironmentServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("environment server did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        # Embedded, the caller talks MCP next: wait for the plane the lifespan builds in the
        # background (a served process answers /health meanwhile; environment.plane).
        plane = self.app.state.plane
        if not plane.wait_ready(max(0.0, deadline - time.monotonic())):
            self.stop()
            why = plane.error or f"the MCP gateway was not ready within {self._startup_timeout_s:g} s"
            raise RuntimeError(f"environment did not start: {why}")
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def __enter__(self) -> EnvironmentServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
