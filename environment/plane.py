"""The environment's MCP plane, built in the background once the service is up.

The MCP plane is what serves ``/mcp`` and ``POST /apps``: the gateway manager, the front
server behind ``/mcp`` (fastmcp), the lean ``/mcp`` path, and the app servers' preload. Its
imports (fastmcp's server and the MCP SDK's generated models) are most of the environment's
start: about 0.5 s of the ~0.9 s that ``import environment`` used to cost on the 2-vCPU
machine. So neither ``import environment`` nor :func:`environment.create_app` imports them:
the app's lifespan starts building the plane on a worker thread and the service answers
meanwhile. What needs it waits for it:

- ``/mcp`` requests and ``POST``/``GET /apps`` wait until the plane is ready (at most the
  settings' ``ready_timeout_s``), then go on as before; they never see a half-built plane.
  A request to ``/mcp`` without the bearer token it needs is refused (401) before it waits;
- ``GET /health`` answers at once, with ``mcp_ready`` telling whether the plane is up
  (``servers_preloaded`` whether the app servers are), and 503 naming the error when the
  plane failed to build: a service that cannot serve MCP is not healthy;
- the data plane (``/data/populate``, ``/data/snapshot``) does not need it at all, so a
  world is populated while the plane is still being built.

The worker thread imports and builds the plane; the event loop then starts the gateway manager
and the front server's session manager and marks the plane ready. Then the app servers'
preload runs on a thread of its own (``POST /apps`` waits for it before it validates its body,
since both import the servers' modules; nothing else does), and the start-up heap is frozen
after it when asked to. A plane that stops (the lifespan ends) or fails later answers 503 too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from atoll.errors import AtollError, ErrorCode, http_status
from atoll.http import bearer_matches, error_body, error_bytes
from atoll.runtime import freeze_startup_heap, resume_full_collections
from environment.gateway_errors import describe_error
from environment.metrics import EnvironmentMetrics
from environment.preload import app_servers_preloaded, start_preload, wait_for_preload
from environment.settings import EnvironmentSettings

if TYPE_CHECKING:
    from environment.gateway import GatewayManager, ServerFactory
    from environment.mcp_fast import McpFastPath

logger = logging.getLogger("environment.plane")

#: The paths the MCP plane serves (``/mcp/`` is served as ``/mcp``; see environment.app).
MCP_PATH = "/mcp"
MCP_PATHS = (MCP_PATH, MCP_PATH + "/")


class McpPlaneUnavailable(AtollError):
    """The MCP plane is not there to serve a request: it failed to build, is not running (the
    app's lifespan never started, or has ended), or was not ready within the ready timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.mcp_unavailable, message)


class BearerTokenGuard:
    """ASGI wrapper answering 401 unless the request carries ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization")
            if not bearer_matches(raw.decode("latin-1") if raw else None, self.token):
                body = error_bytes(
                    ErrorCode.unauthorized, "missing or wrong bearer token for /mcp", detail_field=True
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": http_status("unauthorized"),
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class _Built:
    """The plane as the worker thread built it, before the event loop starts it."""

    manager: GatewayManager
    fast_path: McpFastPath
    http_app: Any  # fastmcp's Starlette app for /mcp; its lifespan runs the sessions
    mcp_app: ASGIApp  # the same behind the /mcp token guard
    front_door: ASGIApp  # the lean /mcp path, then FastAPI's stack


class McpPlane:
    """Builds and holds the environment's MCP plane (see the module).

    ``stack`` is the app's own entry below the front layers (FastAPI's middleware stack and
    routing), where requests the lean ``/mcp`` path does not answer go on to. ``token`` is the
    bearer token ``/mcp`` requires (checked before a request waits for the plane, too).
    ``preload`` starts the app servers' preload once the plane is ready; ``freeze_heap``
    freezes the start-up heap once everything is built (after the preload, when there is one).
    """

    def __init__(
        self,
        settings: EnvironmentSettings,
        metrics: EnvironmentMetrics,
        stack: ASGIApp,
        *,
        server_factory: ServerFactory | None = None,
        token: str | None = None,
        preload: bool = False,
        freeze_heap: bool = False,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.server_factory = server_factory
        self.token = token
        self.preload = preload
        self.freeze_heap = freeze_heap
        self._stack = stack
        #: the gateway manager, the lean path's state (tests read its counts): set while ready
        self.manager: GatewayManager | None = None
        self.fast_path: McpFastPath | None = None
        #: why the plane is not there, once it failed or stopped (None while building and ready)
        self.error: str | None = None
        #: seconds from the start of the build to ready (None until then)
        self.build_seconds: float | None = None
        self._front_door: ASGIApp | None = None  # the lean path, then FastAPI's stack
        self._mcp_app: ASGIApp | None = None  # fastmcp's /mcp app behind its token guard
        self._settled = threading.Event()  # ready, failed or stopped
        self._settled_async: anyio.Event | None = None  # the same, for the event loop
        self._ready = False
        self._frozen = False  # the start-up heap was frozen (full collections resumed)
        # a request for /mcp before the plane is ready: the token first, then the wait
        self._unready: ASGIApp = BearerTokenGuard(self._when_ready, token) if token else self._when_ready

    # -- state ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether ``/mcp`` and ``/apps`` are served without waiting."""
        return self._ready

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """Block (another thread than the event loop's) until the plane is ready; False when it
        failed, stopped or ``timeout_s`` passed first."""
        self._settled.wait(timeout_s)
        return self._ready

    async def require(self) -> GatewayManager:
        """The gateway manager once the plane is ready (waiting for it, up to the settings'
        ``ready_timeout_s``). Raises McpPlaneUnavailable when it failed or stopped, is not
        running or did not become ready in time."""
        if not self._ready:
            await self._wait()
        assert self.manager is not None
        return self.manager

    async def _wait(self) -> None:
        if self.error is None and self._settled_async is not None:
            with anyio.move_on_after(self.settings.ready_timeout_s):
                await self._settled_async.wait()
        if self._ready:
            return
        if self.error is not None:
            raise McpPlaneUnavailable(self.error)
        if self._settled_async is None:
            raise McpPlaneUnavailable("the MCP gateway is not running (the app's lifespan has not started)")
        raise McpPlaneUnavailable(
            f"the MCP gateway was not ready within {self.settings.ready_timeout_s:g} s of waiting"
        )

    async def preloaded(self) -> None:
        """Wait for the app servers' preload when one is running (no time limit, as building
        the servers for ``POST /apps`` never had one): it imports the servers' modules, which
        ``/apps`` would otherwise import beside it."""
        if not app_servers_preloaded():
            await anyio.to_thread.run_sync(wait_for_preload)

    def world_replaced(self) -> None:
        """Tell the gateway the world was replaced (nothing to tell before it is built: the
        first ``POST /apps`` builds its servers over the world as it is then)."""
        if self.manager is not None:
            self.manager.world_replaced()

    def warm(self) -> threading.Thread | None:
        """Build the live gateway's app-data indexes in the background (none before it is built)."""
        return self.manager.warm() if self.manager is not None else None

    # -- ASGI entries ----------------------------------------------------------------------

    async def front_door(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Ahead of FastAPI's stack: ``/mcp`` requests go to the lean path (checking the token,
        then waiting for the plane first when it is not ready), everything else straight on to
        the stack."""
        front = self._front_door
        if front is not None:
            await front(scope, receive, send)
        elif scope["type"] == "lifespan" or scope.get("path") not in MCP_PATHS:
            await self._stack(scope, receive, send)
        else:
            await self._unready(scope, receive, send)

    async def _when_ready(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await self._await_for(scope, receive, send):
            front = self._front_door
            assert front is not None
            await front(scope, receive, send)

    async def mcp_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """fastmcp's ``/mcp`` app behind its token guard (once the plane is ready)."""
        app = self._mcp_app
        if app is None:
            if not await self._await_for(scope, receive, send):
                return
            app = self._mcp_app
            assert app is not None
        await app(scope, receive, send)

    async def _await_for(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Wait for the plane on behalf of a request; when it is not there, answer 503 (naming
        why, in the body every route gives) and return False."""
        try:
            await self.require()
        except McpPlaneUnavailable as exc:
            if scope["type"] == "http":
                body = error_body(exc.code, exc.message, compat_detail=exc.message)
                await JSONResponse(body, status_code=http_status(exc.code))(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1013})  # try again later
            return False
        return True

    # -- bring-up --------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self, app: Any) -> AsyncIterator[None]:
        """For the app's lifespan: build the plane in the background and serve meanwhile; on
        exit, stop what it started (the gateways and their child processes, fastmcp's
        sessions) and answer later requests for it with 503."""
        stop = anyio.Event()
        # (a lifespan run again, as a test client may, builds a plane of its own)
        self._ready, self.error, self.build_seconds = False, None, None
        self._front_door = self._mcp_app = None
        self.manager = self.fast_path = None
        self._settled.clear()
        self._settled_async = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._run, app, stop)
            try:
                yield
            finally:
                stop.set()

    async def _run(self, app: Any, stop: anyio.Event) -> None:
        started = time.perf_counter()
        try:
            built = await anyio.to_thread.run_sync(self._build)
        except Exception as exc:
            self._failed("the MCP gateway failed to start", exc)
            return
        if stop.is_set():  # shut down while it was built: start nothing
            self._end("the MCP gateway has stopped (the environment is shutting down)")
            return
        try:
            async with built.manager, built.http_app.lifespan(app):
                self.build_seconds = time.perf_counter() - started
                self.manager, self.fast_path = built.manager, built.fast_path
                self._mcp_app, self._front_door = built.mcp_app, built.front_door
                self._ready = True
                self._after_ready()  # (without a preload the heap is frozen before anyone is told)
                self._settle()
                logger.info("MCP gateway ready", extra={"duration_ms": round(self.build_seconds * 1000)})
                await stop.wait()
        except Exception as exc:
            self._failed(
                "the MCP gateway failed to start" if not self._ready else "the MCP gateway stopped", exc
            )
        finally:
            self._end("the MCP gateway has stopped (the environment is shutting down)")

    def _after_ready(self) -> None:
        """Preload the app servers (a thread) and freeze the start-up heap after it, or now."""
        if self.preload and start_preload(then=self._freeze) is not None:
            return
        self._freeze()

    def _freeze(self) -> None:
        if self.freeze_heap and not self._frozen:
            self._frozen = True
            freeze_startup_heap()  # also ends atoll env serve's deferral of full collections

    def _failed(self, what: str, exc: BaseException) -> None:
        message = f"{what}: {describe_error(exc)}"
        logger.error(what, extra={"error": describe_error(exc)}, exc_info=exc)
        self._end(message)

    def _end(self, message: str) -> None:
        """The plane is not (or no longer) there: say why to every request that needs it."""
        if self.error is None:
            self.error = message
        self._ready = False
        self._front_door = self._mcp_app = None
        self.manager = self.fast_path = None
        if self.freeze_heap and not self._frozen:
            resume_full_collections()  # no start-up freeze is coming to end the deferral
        self._settle()

    def _settle(self) -> None:
        self._settled.set()
        if self._settled_async is not None:
            self._settled_async.set()

    def _build(self) -> _Built:
        """Import and build the plane (a worker thread); nothing is served from it until
        :meth:`_run` has started it."""
        from environment.coworkers import CoworkerEngine
        from environment.gateway import GatewayManager
        from environment.mcp_fast import FastMcpCalls, McpFastPath
        from environment.mcp_front import SessionRegistry, create_front_server

        settings = self.settings
        sessions = SessionRegistry()
        manager = GatewayManager(
            fs_root=settings.fs_root.resolve(),
            apps_data_root=settings.apps_data_root.resolve(),
            ready_timeout_s=settings.ready_timeout_s,
            drain_timeout_s=settings.drain_timeout_s,
            metrics=self.metrics,
            server_factory=self.server_factory,
            tool_names=settings.tool_names,
            on_swap=sessions.notify_tools_changed,
            coworkers=CoworkerEngine(settings),
        )
        front = create_front_server(manager, sessions)
        http_app = front.http_app(
            path=MCP_PATH, host_origin_protection="auto", json_response=settings.mcp_json_response
        )
        # Hot /mcp requests (tools/call, tools/list) are answered below fastmcp's machinery
        # (environment/mcp_fast.py), ahead of FastAPI's own middleware stack.
        fast_path = McpFastPath(
            manager,
            sessions,
            front,
            token=self.token,
            enabled=settings.mcp_fast_path and settings.mcp_json_response,
        )
        return _Built(
            manager=manager,
            fast_path=fast_path,
            http_app=http_app,
            mcp_app=BearerTokenGuard(http_app, self.token) if self.token else http_app,
            front_door=FastMcpCalls(self._stack, fast_path=fast_path, path=MCP_PATH),
        )
