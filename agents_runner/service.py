"""The agents runner HTTP service (``atoll agent serve``, port 8081 by default).

| method path | does |
|---|---|
| ``GET /health`` | 200 when serving |
| ``GET /agents`` | registered agents and the config JSON Schema |
| ``POST /runs`` | start a run (body: :class:`RunRequest`); 202 ``{"run_id", "state"}`` |
| ``GET /runs/{id}`` | state ``running|finished``, status, steps, elapsed time, usage |
| ``GET /runs/{id}/trajectory`` | the trajectory (409 while running) |
| ``POST /runs/{id}/cancel`` | stop the run; its trajectory ends ``cancelled`` |

When ``ATOLL_AGENT_TOKEN`` is set, every endpoint but ``/health`` requires
``Authorization: Bearer $ATOLL_AGENT_TOKEN``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from agents_runner.config import AgentConfig
from agents_runner.manager import RunManager, RunRequest
from agents_runner.registry import agents
from agents_runner.settings import AgentRunnerSettings
from atoll.http import add_error_handler, bearer_guard
from atoll.http_guard import guard

_STATUS_OF_CODE = {"unknown_run": 404, "run_running": 409}


def create_app(settings: AgentRunnerSettings | None = None, *, token: str | None = None) -> FastAPI:
    """The service app; ``token`` (default: the settings', i.e. ``$ATOLL_AGENT_TOKEN``) protects it."""
    settings = settings or AgentRunnerSettings()
    if token is None and settings.token is not None:
        token = settings.token.get_secret_value() or None
    manager = RunManager(keep=settings.keep_runs)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await manager.shutdown()

    app = FastAPI(title="atoll agents runner", lifespan=lifespan)
    guard(app)  # Host allow-list and cross-site refusal (atoll.http_guard)
    app.state.manager = manager

    authorize = bearer_guard(token)
    add_error_handler(app, _STATUS_OF_CODE)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/agents", dependencies=[Depends(authorize)])
    async def list_agents() -> dict[str, Any]:
        return {
            "agents": [
                {"name": spec.name, "description": spec.description, "uses_model": spec.uses_model}
                for spec in agents()
            ],
            "config_schema": AgentConfig.model_json_schema(),
        }

    @app.post("/runs", status_code=202, dependencies=[Depends(authorize)])
    async def start_run(body: RunRequest) -> dict[str, str]:
        return {"run_id": manager.start(body), "state": "running"}

    @app.get("/runs/{run_id}", dependencies=[Depends(authorize)])
    async def run_status(run_id: str) -> dict[str, Any]:
        return manager.status(run_id)

    @app.get("/runs/{run_id}/trajectory", dependencies=[Depends(authorize)])
    async def run_trajectory(run_id: str) -> JSONResponse:
        return JSONResponse(manager.trajectory(run_id).model_dump(mode="json"))

    @app.post("/runs/{run_id}/cancel", status_code=202, dependencies=[Depends(authorize)])
    async def cancel_run(run_id: str) -> dict[str, str]:
        manager.cancel(run_id)
        return {"run_id": run_id, "state": "cancelling"}

    return app
