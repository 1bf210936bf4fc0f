"""The ``/apps`` configuration: which MCP servers the gateway aggregates, and how to reach each.

Shapes are Archipelago's (``{"mcpServers": {NAME: {transport, command, args, env, cwd, url,
headers}}}``) plus our in-process servers (``{"transport": "inprocess", "server": "mail",
"options": {...}}``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from atoll.errors import AtollError

Transport = Literal["stdio", "http", "streamable-http", "sse", "inprocess"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class ServerConfig(BaseModel):
    """How to reach one MCP server.

    ``transport`` may be omitted: ``command`` means stdio, ``url`` means streamable HTTP,
    ``server`` means in-process.
    """

    model_config = ConfigDict(extra="ignore")

    transport: Transport | None = None
    # stdio child
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    # remote HTTP server
    url: str | None = None
    headers: dict[str, str] | None = None
    # our own server, run in-process
    server: str | None = None
    mode: Literal["individual", "consolidated"] = "individual"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _resolve_transport(self) -> ServerConfig:
        if self.transport is None:
            if self.command:
                self.transport = "stdio"
            elif self.url:
                self.transport = "http"
            elif self.server:
                self.transport = "inprocess"
            else:
                raise ValueError("needs one of 'command' (stdio), 'url' (http) or 'server' (inprocess)")
        if self.transport == "streamable-http":
            self.transport = "http"
        required = {"stdio": "command", "http": "url", "sse": "url", "inprocess": "server"}[self.transport]
        if not getattr(self, required):
            raise ValueError(f"transport {self.transport!r} needs {required!r}")
        if self.transport == "inprocess" and self.server:  # checked just above
            self.options = _validated_options(self.server, self.options)
        return self


def _validated_options(server: str, options: dict[str, Any]) -> dict[str, Any]:
    """An in-process server's options checked against the options it declares, so ``/apps``
    rejects an unknown or mistyped one (422 naming it) before any server starts. An unknown
    server is left to the gateway, which names it (and the known ones) when it starts."""
    from mcp_servers import get_definition
    from mcp_servers._core.options import InvalidOption, validate_options

    try:
        definition = get_definition(server)
    except AtollError:
        return options
    try:
        return validate_options(server, definition.options, options)
    except InvalidOption as exc:
        raise ValueError(exc.message) from None


class AppsConfig(BaseModel):
    """The whole gateway configuration; equal configs describe the same gateway."""

    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, ServerConfig] = Field(  # noqa: N815 (Archipelago's name)
        default_factory=dict, json_schema_extra={"propertyNames": {"pattern": _SERVER_NAME.pattern}}
    )

    @field_validator("mcpServers")
    @classmethod
    def _check_names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            if not _SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r} must be 1-64 letters, digits, '_' or '-' and start with a letter or digit"
                )
        return servers
