"""Settings of the environment service, read from ``ATOLL_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class EnvironmentSettings(BaseSettings):
    """One environment: where its world lives, who may control it, and its safety limits.

    Every field can be set with ``ATOLL_<FIELD>`` (e.g. ``ATOLL_FS_ROOT``,
    ``ATOLL_ENV_TOKEN``); roots are configurable so many environments run side by side.
    """

    model_config = SettingsConfigDict(env_prefix="ATOLL_", extra="ignore")

    fs_root: Path = Field(Path("/filesystem"), description="world documents; the agent sees it as '/'")
    apps_data_root: Path = Field(Path("/.apps_data"), description="app data (mail, calendar, chat)")
    env_token: SecretStr | None = Field(None, description="bearer token for /apps and /data/*")
    mcp_token: SecretStr | None = Field(None, description="bearer token for /mcp")

    max_archive_bytes: int = Field(8 * 1024**3, description="most uncompressed bytes one populate may write")
    max_archive_members: int = Field(200_000, description="most members one archive may hold")
    max_compression_ratio: float = Field(
        200.0, description="uncompressed/compressed ratio above which an archive is a bomb"
    )
    ratio_check_floor_bytes: int = Field(
        32 * 1024**2, description="the ratio is enforced once this many bytes were extracted"
    )

    preload_servers: bool = Field(
        True, description="import our app servers in the background at start, so POST /apps is fast"
    )
    ready_timeout_s: float = Field(
        30.0, description="time every MCP server gets to initialise and list tools"
    )
    drain_timeout_s: float = Field(10.0, description="time in-flight calls get to finish after a hot swap")

    snapshot_url_prefix: str | None = Field(
        None, description="default fsspec URL prefix for /data/snapshot/s3 when the request gives no url"
    )
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="fsspec storage options (e.g. S3 endpoint_url, key, secret)"
    )
    mcp_json_response: bool = Field(
        True,
        description="answer each /mcp request with one JSON body (fast); false streams SSE, which "
        "also forwards progress/log notifications sent while a tool runs",
    )
    tool_names: Literal["atoll", "archipelago"] = Field(
        "atoll",
        description="'atoll': tools are always named {server}_{tool}; 'archipelago': a config with one "
        "server exposes its tools unprefixed (list_files), as Archipelago does",
    )
    log_level: str = Field("INFO", description="root log level of the service")
    json_logs: bool = Field(True, description="structured JSON logs on stderr")
