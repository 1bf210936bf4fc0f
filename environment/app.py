"""The environment's FastAPI app: thin routes over the gateway, populate and snapshot modules."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from atoll import __version__
from atoll.http import DETAILED_ERROR_RESPONSES, add_error_handler, bearer_guard, error_body
from atoll.http_guard import GuardMiddleware, HostPolicy
from atoll.runtime import freeze_startup_heap
from environment.config import AppsConfig
from environment.data_jobs import router as data_jobs_router
from environment.data_routes import router as data_router
from environment.gateway import (
    GatewayManager,
    GatewayNotReady,
    ServerFactory,
    ToolNameCollision,
)
from environment.logs import configure_logging
from environment.mcp_fast import FastMcpCalls, McpFastPath
from environment.mcp_front import BearerTokenGuard, SessionRegistry, create_front_server
from environment.metrics import EnvironmentMetrics
from environment.populate import STAGING_PREFIX
from environment.preload import app_servers_preloaded, preload_app_servers
from environment.replies import AppsApplied, AppsShown, EnvironmentHealth, Root
from environment.settings import EnvironmentSettings

logger = logging.getLogger("environment.app")

MCP_PATH = "/mcp"


class _McpOnly:
    """Routes ``/mcp`` and ``/mcp/`` to the MCP app (behind its own token); 404 elsewhere.

    ``/mcp/`` is served directly rather than redirected: Archipelago's clients use that URL and
    some MCP clients do not follow a redirect on POST.
    """

    def __init__(self, mcp_app: ASGIApp, token: str | None) -> None:
        self.app = BearerTokenGuard(mcp_app, token) if token else mcp_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.rstrip("/") != MCP_PATH:
            body = error_body("not_found", "Not Found", compat_detail="Not Found")
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        if path != MCP_PATH and scope["type"] == "http":
            scope = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
        await self.app(scope, receive, send)


class _EnvironmentApp(FastAPI):
    """FastAPI with the environment's front layers ahead of its whole middleware stack.

    HTTP and WebSocket requests enter :attr:`outer` (the Host/cross-site guard, then the lean
    ``/mcp`` path) before FastAPI's own layers (telemetry, body limit, the 500 handler) and
    routing, which a hot ``/mcp`` request answered by the lean path never needs; every other
    request continues into them unchanged. Lifespan events go straight to FastAPI.
    """

    outer: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.outer is not None and scope["type"] != "lifespan":
            await self.outer(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def stack(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own entry: its middleware stack, then routing (what :attr:`outer` wraps)."""
        await super().__call__(scope, receive, send)


def _preload(freeze_heap: bool) -> None:
    try:
        preload_app_servers()
    finally:
        if freeze_heap:
            freeze_startup_heap()


def create_app(
    settings: EnvironmentSettings | None = None,
    *,
    server_factory: ServerFactory | None = None,
    freeze_heap: bool = False,
    bind_host: str | None = None,
) -> FastAPI:
    """A ready-to-serve environment app.

    ``settings`` default to the ``ATOLL_*`` environment; ``server_factory`` replaces
    ``mcp_servers.create_server`` for ``"inprocess"`` entries (tests, custom servers).
    ``freeze_heap`` (for a process that serves nothing else) exempts the startup heap from
    the garbage collector once started and again once the app servers are preloaded.
    ``bind_host`` (the address served) is answered as a Host name besides ``localhost``, IP
    literals and ``ATOLL_ALLOWED_HOSTS`` (:mod:`atoll.http_guard`).
    """
    settings = settings or EnvironmentSettings()
    configure_logging(settings.log_level, json_logs=settings.json_logs)
    for root in (settings.fs_root, settings.apps_data_root):
        root.mkdir(parents=True, exist_ok=True)
        for leftover in root.glob(f"{STAGING_PREFIX}*"):  # from a populate cut short by a crash
            shutil.rmtree(leftover, ignore_errors=True)
    metrics = EnvironmentMetrics()
    sessions = SessionRegistry()
    manager = GatewayManager(
        fs_root=settings.fs_root.resolve(),
        apps_data_root=settings.apps_data_root.resolve(),
        ready_timeout_s=settings.ready_timeout_s,
        drain_timeout_s=settings.drain_timeout_s,
        metrics=metrics,
        server_factory=server_factory,
        tool_names=settings.tool_names,
        on_swap=sessions.notify_tools_changed,
    )
    front = create_front_server(manager, sessions)
    mcp_app = front.http_app(
        path=MCP_PATH, host_origin_protection="auto", json_response=settings.mcp_json_response
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with manager, mcp_app.lifespan(app):
            if freeze_heap:
                freeze_startup_heap()  # also ends atoll env serve's deferral of full collections
            if settings.preload_servers and server_factory is None:
                threading.Thread(
                    target=_preload, args=(freeze_heap,), name="atoll-preload", daemon=True
                ).start()
            logger.info("environment ready", extra={"fs_root": str(settings.fs_root)})
            yield

    app = _EnvironmentApp(
        title="atoll environment",
        version=__version__,
        lifespan=lifespan,
        responses=DETAILED_ERROR_RESPONSES,  # every route: the error body below
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.gateway = manager
    token = settings.mcp_token.get_secret_value() if settings.mcp_token else None
    # Hot /mcp requests (tools/call, tools/list) are answered below fastmcp's machinery
    # (environment/mcp_fast.py), and ahead of FastAPI's own middleware stack: every request
    # meets the Host/cross-site guard first, then the lean path, then FastAPI.
    app.state.mcp_fast = McpFastPath(
        manager, sessions, front, token=token, enabled=settings.mcp_fast_path and settings.mcp_json_response
    )
    app.outer = GuardMiddleware(
        FastMcpCalls(app.stack, fast_path=app.state.mcp_fast, path=MCP_PATH),
        policy=HostPolicy(settings.allowed_host_list, bind_host),
        body_timeout_s=settings.body_timeout_s,
        detail_field=True,  # Archipelago's clients read FastAPI's "detail" (docs/environment.md)
    )
    # The one error body, plus FastAPI's "detail" beside it for Archipelago's clients.
    add_error_handler(app, detail_field=True)

    env_token = settings.env_token.get_secret_value() if settings.env_token else None
    require_env_token = bearer_guard(env_token)  # control plane: /metrics, /apps, /data/*

    @app.get("/")
    async def root() -> Root:
        # Archipelago answers GET / (a liveness probe some clients use); never needs a token.
        return Root(service="atoll environment", version=__version__, health="/health", mcp=MCP_PATH)

    @app.get("/health")
    async def health() -> EnvironmentHealth:
        from mcp_servers.code.sandbox import sandbox_report  # lazily: the code server's imports

        return EnvironmentHealth(
            status="ok",
            servers_preloaded=app_servers_preloaded(),
            code_sandbox=sandbox_report(),  # whether code_exec can run here, how, or why not
        )

    @app.get(
        "/metrics",
        dependencies=[Depends(require_env_token)],
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/apps", dependencies=[Depends(require_env_token)])
    async def set_apps(config: AppsConfig) -> AppsApplied:
        started = time.perf_counter()
        try:
            changed = await manager.apply(config)
        except ToolNameCollision as exc:
            metrics.gateway_swaps.labels("collision").inc()
            logger.warning("apps rejected", extra={"error": exc.message})
            raise HTTPException(
                400, {"error": exc.message, "code": exc.code, "failed_servers": list(exc.servers)}
            ) from exc
        except GatewayNotReady as exc:
            metrics.gateway_swaps.labels("not_ready").inc()
            logger.warning("apps not ready", extra={"error": exc.message})
            raise HTTPException(
                503,
                {
                    "error": exc.message,
                    "code": exc.code,
                    "failed_servers": sorted(exc.failures),
                    "details": {name: {"error": error} for name, error in sorted(exc.failures.items())},
                },
            ) from exc
        duration_ms = (time.perf_counter() - started) * 1000
        metrics.gateway_swaps.labels("swapped" if changed else "unchanged").inc()
        gateway = manager.current
        logger.info(
            "apps configured",
            extra={
                "servers": list(config.mcpServers),
                "changed": changed,
                "duration_ms": round(duration_ms, 1),
            },
        )
        return AppsApplied(
            servers=list(config.mcpServers),
            duration_ms=duration_ms,
            changed=changed,
            tools=sorted(gateway.tools),
        )

    @app.get("/apps", dependencies=[Depends(require_env_token)])
    async def get_apps() -> AppsShown:
        gateway = manager.current
        return AppsShown.model_validate(
            {
                "mcpServers": {name: _redacted(server) for name, server in gateway.config.mcpServers.items()},
                "servers": list(gateway.config.mcpServers),
                "tools": gateway.tool_table(),
            }
        )

    app.include_router(data_router, prefix="/data", dependencies=[Depends(require_env_token)])
    app.include_router(data_jobs_router, prefix="/data", dependencies=[Depends(require_env_token)])
    app.mount("/", _McpOnly(mcp_app, token))
    return app


def _redacted(server: Any) -> dict[str, Any]:
    """A server config safe to show: values of env and headers (often secrets) are hidden."""
    shown = server.model_dump(exclude_none=True)
    for key in ("env", "headers"):
        if shown.get(key):
            shown[key] = {name: "***" for name in shown[key]}
    return shown
