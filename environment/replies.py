"""Reply models of the environment's routes (shown in OpenAPI). Field for field the shapes
Archipelago's clients read; the Archipelago job routes' models are in ``data_jobs.py``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Root(BaseModel):
    """``GET /``: a liveness probe some Archipelago clients use."""

    service: str
    version: str
    health: str = Field(description="path of the health route")
    mcp: str = Field(description="path of the MCP endpoint")


class CodeSandbox(BaseModel):
    """Whether ``code_exec`` can run here, how and as whom (``mcp_servers.code.sandbox``)."""

    available: bool | None = Field(description="null while the first probe runs")
    mode: str | None
    reason: str | None = Field(description="why not, or what is being done")
    user: str | None
    cgroup: list[str]
    isolation: str | None = Field(None, description="how runs are kept apart, or why they may not be")


class EnvironmentHealth(BaseModel):
    """``GET /health``."""

    status: str
    mcp_ready: bool = Field(
        description="whether the MCP gateway (/mcp, /apps) is up; until then those requests wait for it"
    )
    servers_preloaded: bool
    code_sandbox: CodeSandbox = Field(description="whether code_exec can run here, how, or why not")


class AppsApplied(BaseModel):
    """``POST /apps``."""

    servers: list[str]
    duration_ms: float
    changed: bool = Field(description="false when the configuration was already live")
    tools: list[str]


class ToolRow(BaseModel):
    name: str = Field(description="the name the agent calls")
    server: str
    tool: str = Field(description="the server's own name for it")
    description: str | None


class ServerShown(BaseModel):
    """One server of ``GET /apps``: its configuration as given, ``env`` and ``headers`` values
    shown as ``***``; fields that were not set are left out."""

    transport: str
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = None
    server: str | None = None
    mode: str | None = None
    options: dict[str, Any] | None = Field(None, description="the in-process server's options")


class AppsShown(BaseModel):
    """``GET /apps``: the live configuration, env and header values hidden."""

    mcpServers: dict[str, ServerShown]  # noqa: N815 (Archipelago's name)
    servers: list[str]
    tools: list[ToolRow]


class Populated(BaseModel):
    """``POST /data/populate`` and ``POST /data/populate/s3``."""

    objects_added: int
    extracted_bytes: int
    skipped_members: int
    subsystem: str
    subsystems: list[str]
    mode: str
    duration_ms: float


class SnapshotUploaded(BaseModel):
    """``POST /data/snapshot/s3`` in atoll's form (``url`` or ``storage_options`` given)."""

    snapshot_id: str
    url: str
    s3_uri: str
    size_bytes: int
    sha256: str
    files: int
