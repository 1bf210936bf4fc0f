"""The environment's FastAPI app: thin routes over the gateway, populate and snapshot modules."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from atoll import __version__, telemetry
from atoll.errors import ErrorCode, http_status
from atoll.http import (
    DETAILED_ERROR_RESPONSES,
    add_error_handler,
    bearer_guard,
    error_body,
    error_reply,
    strict_json,
)
from atoll.http_guard import GuardMiddleware, HostPolicy
from environment.config import AppsConfig
from environment.data_jobs import router as data_jobs_router
from environment.data_routes import router as data_router
from environment.gateway_errors import GatewayNotReady, ToolNameCollision
from environment.logs import configure_logging
from environment.metrics import EnvironmentMetrics
from environment.plane import MCP_PATH, McpPlane, McpPlaneUnavailable
from environment.populate import STAGING_PREFIX
from environment.preload import app_servers_preloaded
from environment.replies import AppsApplied, AppsShown, EnvironmentHealth, Root
from environment.settings import EnvironmentSettings

if TYPE_CHECKING:
    from environment.gateway import ServerFactory

logger = logging.getLogger("environment.app")


class _McpOnly:
    """Routes ``/mcp`` and ``/mcp/`` to the MCP plane's app (behind its own token); 404 elsewhere.

    ``/mcp/`` is served directly rather than redirected: Archipelago's clients use that URL and
    some MCP clients do not follow a redirect on POST.
    """

    def __init__(self, plane: McpPlane) -> None:
        self.plane = plane

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.rstrip("/") != MCP_PATH:
            body = error_body(ErrorCode.not_found, "Not Found", compat_detail="Not Found")
            await JSONResponse(body, status_code=http_status("not_found", refusal=True))(scope, receive, send)
            return
        if path != MCP_PATH and scope["type"] == "http":
            scope = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
        await self.plane.mcp_app(scope, receive, send)


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


def create_app(
    settings: EnvironmentSettings | None = None,
    *,
    server_factory: ServerFactory | None = None,
    freeze_heap: bool = False,
    bind_host: str | None = None,
) -> FastAPI:
    """A ready-to-serve environment app.

    ``settings`` default to the ``ATOLL_*`` environment; ``server_factory`` replaces
    ``mcp_servers.create_tools`` for ``"inprocess"`` entries (tests, custom servers: it may
    return a FastMCP server).
    ``freeze_heap`` (for a process that serves nothing else) exempts the startup heap from
    the garbage collector once the MCP plane is built and the app servers preloaded.
    Neither this nor importing the module imports the MCP machinery (fastmcp, the MCP SDK):
    the app's lifespan builds it in the background (:mod:`environment.plane`).
    ``bind_host`` (the address served) is answered as a Host name besides ``localhost``, IP
    literals and ``ATOLL_ALLOWED_HOSTS`` (:mod:`atoll.http_guard`).
    """
    settings = settings or EnvironmentSettings()
    configure_logging(settings.log_level, json_logs=settings.json_logs)
    for folder in (settings.fs_root, settings.apps_data_root):
        folder.mkdir(parents=True, exist_ok=True)
        for leftover in folder.glob(f"{STAGING_PREFIX}*"):  # from a populate cut short by a crash
            shutil.rmtree(leftover, ignore_errors=True)
    metrics = EnvironmentMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The MCP plane (gateway, /mcp, the app servers' preload) is built in the background:
        # /health and the data plane answer meanwhile; /apps and /mcp wait for it.
        async with plane.running(app):
            logger.info("environment serving", extra={"fs_root": str(settings.fs_root)})
            yield

    app = _EnvironmentApp(
        title="atoll environment",
        version=__version__,
        lifespan=lifespan,
        responses=DETAILED_ERROR_RESPONSES,  # every route: the error body below
        **telemetry.service_options("atoll-environment"),  # traces: {} unless an OTLP endpoint is set
    )
    token = settings.mcp_token.get_secret_value() if settings.mcp_token else None
    plane = McpPlane(
        settings,
        metrics,
        app.stack,
        server_factory=server_factory,
        token=token,
        preload=settings.preload_servers and server_factory is None,
        freeze_heap=freeze_heap,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.plane = plane
    # Every request meets the Host/cross-site guard first, then the lean /mcp path (once the
    # plane is up), then FastAPI.
    app.outer = GuardMiddleware(
        plane.front_door,
        policy=HostPolicy(settings.allowed_host_list, bind_host),
        body_timeout_s=settings.body_timeout_s,
        detail_field=True,  # Archipelago's clients read FastAPI's "detail" (docs/environment.md)
    )
    # The one error body, plus FastAPI's "detail" beside it for Archipelago's clients; the MCP
    # plane not being there (McpPlaneUnavailable, from plane.require()) is a 503.
    add_error_handler(app, detail_field=True)

    env_token = settings.env_token.get_secret_value() if settings.env_token else None
    require_env_token = bearer_guard(env_token)  # control plane: /metrics, /apps, /data/*

    @app.get("/")
    async def root() -> Root:
        # Archipelago answers GET / (a liveness probe some clients use); never needs a token.
        return Root(service="atoll environment", version=__version__, health="/health", mcp=MCP_PATH)

    @app.get("/health", responses={503: {"description": "the MCP gateway failed to start"}})
    async def health() -> EnvironmentHealth:
        from mcp_servers.code.sandbox import sandbox_report  # lazily: the code server's imports

        if plane.error is not None:  # a service that cannot serve MCP is not healthy
            raise McpPlaneUnavailable(plane.error)
        return EnvironmentHealth(
            status="ok",
            mcp_ready=plane.ready,
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

    async def plane_up() -> None:
        await plane.require()
        await plane.preloaded()

    # plane_up is solved before the body is validated (FastAPI solves a route's dependencies
    # first, after the token): validating an in-process server's options imports its module,
    # which the preload does on its own thread; waiting for the plane and the preload first
    # means one import, not two at once (and none on the event loop while the preload runs).
    @app.post(
        "/apps",
        dependencies=[Depends(require_env_token), Depends(plane_up), Depends(strict_json(AppsConfig))],
    )
    async def set_apps(config: AppsConfig) -> AppsApplied:
        started = time.perf_counter()
        manager = await plane.require()
        try:
            changed = await manager.apply(config)
        except ToolNameCollision as exc:
            metrics.gateway_swaps.labels("collision").inc()
            logger.warning("apps rejected", extra={"error": exc.message})
            raise error_reply(exc, failed_servers=list(exc.servers)) from exc
        except GatewayNotReady as exc:
            metrics.gateway_swaps.labels("not_ready").inc()
            logger.warning("apps not ready", extra={"error": exc.message})
            raise error_reply(
                exc,
                failed_servers=sorted(exc.failures),
                details={name: {"error": error} for name, error in sorted(exc.failures.items())},
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

    # Unset fields left out: a server's configuration is shown as it was given (_redacted).
    @app.get("/apps", dependencies=[Depends(require_env_token)], response_model_exclude_unset=True)
    async def get_apps() -> AppsShown:
        gateway = (await plane.require()).current
        return AppsShown.model_validate(
            {
                "mcpServers": {name: _redacted(server) for name, server in gateway.config.mcpServers.items()},
                "servers": list(gateway.config.mcpServers),
                "tools": gateway.tool_table(),
            }
        )

    app.include_router(data_router, prefix="/data", dependencies=[Depends(require_env_token)])
    app.include_router(data_jobs_router, prefix="/data", dependencies=[Depends(require_env_token)])
    app.mount("/", _McpOnly(plane))
    return app


def _redacted(server: Any) -> dict[str, Any]:
    """A server config safe to show: values of env and headers (often secrets) are hidden."""
    shown = server.model_dump(exclude_none=True)
    for key in ("env", "headers"):
        if shown.get(key):
            shown[key] = {name: "***" for name in shown[key]}
    return shown
