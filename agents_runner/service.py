"""The agents runner HTTP service (``atoll agent serve``, port 8081 by default).

| method path | does |
|---|---|
| ``GET /health`` | 200 when serving |
| ``GET /agents`` | registered agents and the config JSON Schema |
| ``POST /runs`` | start a run (body: :class:`RunRequest`); 202 ``{"run_id", "state"}`` |
| ``GET /runs/{id}`` | state ``running|finished``, status, steps, elapsed time, usage |
| ``GET /runs/{id}/trajectory[?so_far=true][&raw=true]`` | the trajectory (409 while running; with ``so_far``, the trajectory so far, status ``running``; with ``raw``, plus its ``raw_model_calls`` when the run recorded them) |
| ``GET /runs/{id}/checkpoint[?wait_s=]`` | the checkpoint the run waits at to be taken (200), else 204 after ``wait_s`` |
| ``POST /runs/{id}/checkpoint/taken`` | the caller took it (body ``{"step"}``): the run goes on; 409 when it does not wait at it |
| ``POST /runs/{id}/cancel`` | stop the run; its trajectory ends ``cancelled`` |

A run started with a ``checkpoint`` policy pauses at each checkpoint it takes until its caller
took it (the orchestrator snapshots the world meanwhile), and ends with status ``error`` when
nobody does within its ``checkpoint_wait_s``.

When ``ATOLL_AGENT_TOKEN`` is set, every endpoint but ``/health`` requires
``Authorization: Bearer $ATOLL_AGENT_TOKEN``; ``atoll agent serve`` refuses to listen beyond
loopback without it. Request bodies are bounded (``ATOLL_AGENT_MAX_BODY_BYTES``), so are the
runs running at once (``ATOLL_AGENT_MAX_RUNNING``, else 429) and the finished trajectories kept
(``ATOLL_AGENT_KEEP_RUNS``, ``ATOLL_AGENT_KEEP_BYTES``).
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import Depends, FastAPI, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from agents_runner.config import AgentConfig
from agents_runner.manager import RunManager, RunRequest
from agents_runner.registry import agents
from agents_runner.settings import AgentRunnerSettings
from atoll import telemetry
from atoll.agent_checkpoint import AgentCheckpoint
from atoll.errors import AtollError, ErrorCode
from atoll.http import ERROR_RESPONSES, Health, add_error_handler, bearer_guard, model_reply, strict_json
from atoll.http_guard import guard
from atoll.jsonio import dumps_strict, model_json
from atoll.llm.endpoints import within
from atoll.trajectory import RunStatus, Trajectory, Usage


class AgentInfo(BaseModel):
    name: str
    description: str
    uses_model: bool = Field(description="false for agents that call no model (replay)")


class AgentList(BaseModel):
    """``GET /agents``."""

    agents: list[AgentInfo]
    config_schema: dict[str, Any] = Field(description="JSON Schema of the agent config")


class RunStarted(BaseModel):
    """``POST /runs``, ``POST /runs/{id}/checkpoint/taken`` and ``POST /runs/{id}/cancel``."""

    run_id: str
    state: Literal["running", "cancelling"]


class RunState(BaseModel):
    """``GET /runs/{id}``."""

    run_id: str
    agent: str
    model: str
    task_id: str | None
    trial_id: str | None
    state: Literal["running", "finished"]
    status: RunStatus | None = Field(description="how the run ended; null while running")
    steps: int
    elapsed_s: float
    usage: Usage | None
    checkpoint_step: int | None = Field(
        None, description="the step of the checkpoint the run waits at to be taken; null when none"
    )


class CheckpointTaken(BaseModel):
    """``POST /runs/{id}/checkpoint/taken``: the caller took the checkpoint of ``step``."""

    step: int = Field(ge=0)


def create_app(settings: AgentRunnerSettings | None = None, *, token: str | None = None) -> FastAPI:
    """The service app; ``token`` (default: the settings', i.e. ``$ATOLL_AGENT_TOKEN``) protects it."""
    settings = settings or AgentRunnerSettings()
    if token is None and settings.token is not None:
        token = settings.token.get_secret_value() or None
    manager = RunManager(
        keep=settings.keep_runs, max_running=settings.max_running, keep_bytes=settings.keep_bytes
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await manager.shutdown()

    # traces: service_options is {} unless an OTLP endpoint is set (atoll.telemetry)
    app = FastAPI(
        title="atoll agents runner", lifespan=lifespan, **telemetry.service_options("atoll-agents-runner")
    )
    # Host allow-list, cross-site refusal and the body limit (atoll.http_guard)
    guard(app, max_body_bytes=settings.max_body_bytes)
    app.state.manager = manager

    authorize = bearer_guard(token)
    add_error_handler(app)

    guarded: dict[str, Any] = {"dependencies": [Depends(authorize)], "responses": ERROR_RESPONSES}

    @app.get("/health", responses=ERROR_RESPONSES)
    async def health() -> Health:
        return Health(status="ok")

    @app.get("/agents", **guarded)
    async def list_agents() -> AgentList:
        return AgentList(
            agents=[
                AgentInfo(name=spec.name, description=spec.description, uses_model=spec.uses_model)
                for spec in agents()
            ],
            config_schema=AgentConfig.model_json_schema(),
        )

    gateways = [url.strip() for url in settings.gateway_allow.split(",") if url.strip()]

    @app.post(
        "/runs",
        status_code=202,
        dependencies=[Depends(authorize), Depends(strict_json(RunRequest))],
        responses=ERROR_RESPONSES,
    )
    async def start_run(body: RunRequest) -> RunStarted:
        if gateways and not within(body.gateway_url, gateways):
            # The same answer whatever is there: the runner is no probe of the network.
            raise AtollError(
                ErrorCode.gateway_not_allowed,
                "gateway_url is not under this runner's ATOLL_AGENT_GATEWAY_ALLOW",
            )
        return RunStarted(run_id=manager.start(body), state="running")

    @app.get("/runs/{run_id}", **guarded)
    async def run_status(run_id: str) -> RunState:
        return RunState.model_validate(manager.status(run_id))

    @app.get(
        "/runs/{run_id}/trajectory",
        dependencies=[Depends(authorize)],
        response_class=JSONResponse,
        responses={200: {"model": Trajectory}, **ERROR_RESPONSES},
    )
    async def run_trajectory(run_id: str, so_far: bool = False, raw: bool = False) -> Response:
        # Written as the trajectory file is (no aliases), not through FastAPI's response_model.
        trajectory = manager.trajectory(run_id, so_far=so_far)
        if not raw:
            return model_reply(trajectory)
        # With its raw model calls (record_raw), which the trajectory file never holds.
        body = json.loads(model_json(trajectory))
        body["raw_model_calls"] = trajectory.raw_model_calls
        return Response(dumps_strict(body), media_type="application/json")

    @app.get(
        "/runs/{run_id}/checkpoint",
        dependencies=[Depends(authorize)],
        response_class=JSONResponse,
        responses={
            200: {"model": AgentCheckpoint},
            204: {"description": "no checkpoint waits to be taken"},
            **ERROR_RESPONSES,
        },
    )
    async def run_checkpoint(
        run_id: str,
        wait_s: float = Query(0.0, ge=0, le=30, description="wait this long for one to be taken"),
    ) -> Response:
        checkpoint = await manager.offered_checkpoint(run_id, wait_s)
        return Response(status_code=204) if checkpoint is None else model_reply(checkpoint)

    @app.post(
        "/runs/{run_id}/checkpoint/taken",
        status_code=202,
        dependencies=[Depends(authorize), Depends(strict_json(CheckpointTaken))],
        responses=ERROR_RESPONSES,
    )
    async def checkpoint_taken(run_id: str, body: CheckpointTaken) -> RunStarted:
        manager.checkpoint_taken(run_id, body.step)
        return RunStarted(run_id=run_id, state="running")

    @app.post("/runs/{run_id}/cancel", status_code=202, **guarded)
    async def cancel_run(run_id: str) -> RunStarted:
        manager.cancel(run_id)
        return RunStarted(run_id=run_id, state="cancelling")

    return app
