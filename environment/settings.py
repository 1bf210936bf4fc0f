"""Settings of the environment service, read from ``ATOLL_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from atoll.http_guard import parse_list
from atoll.settings import EnvironmentTokens, HostSettings


class EnvironmentSettings(EnvironmentTokens, HostSettings):
    """One environment: where its world lives, who may control it, and its safety limits.

    Every field can be set with ``ATOLL_<FIELD>`` (e.g. ``ATOLL_FS_ROOT``,
    ``ATOLL_ENV_TOKEN``); roots are configurable so many environments run side by side.
    """

    fs_root: Path = Field(Path("/filesystem"), description="world documents; the agent sees it as '/'")
    apps_data_root: Path = Field(Path("/.apps_data"), description="app data (mail, calendar, chat)")
    # env_token, mcp_token (EnvironmentTokens) and allowed_hosts (HostSettings) are shared.
    url_allow: str = Field(
        "",
        description="comma-separated URL prefixes populate sources and snapshot destinations must "
        "start with (e.g. 's3://my-bucket/,file:///srv/worlds/'); empty allows any URL",
    )
    header_timeout_s: float = Field(10.0, gt=0, description="time a client gets to send a request's headers")
    body_timeout_s: float = Field(
        30.0, gt=0, description="longest wait for the next piece of a request body before a 408"
    )

    max_archive_bytes: int = Field(8 * 1024**3, description="most uncompressed bytes one populate may write")
    max_archive_members: int = Field(200_000, description="most members one archive may hold")
    max_compression_ratio: float = Field(
        200.0, description="uncompressed/compressed ratio above which an archive is a bomb"
    )
    ratio_check_floor_bytes: int = Field(
        32 * 1024**2, description="the ratio is enforced once this many bytes were extracted"
    )

    keep_unchanged_files: bool = Field(
        True,
        description="a replace populate from a local folder keeps the world files that already hold what "
        "it would lay (environment.world_keep): fewer files created and deleted per trial",
    )
    parked_worlds_dir: Path | None = Field(
        None,
        description="a folder on the worlds' filesystem where replaced worlds are parked for the next "
        "trial of the same seed (environment.world_parking); environments of one process share it",
    )
    parked_worlds_mb: int = Field(
        2048, ge=0, description="allocated MB parked worlds may hold; the oldest go first"
    )
    preload_servers: bool = Field(
        True, description="import our app servers in the background at start, so POST /apps is fast"
    )
    ready_timeout_s: float = Field(
        30.0, description="time every MCP server gets to initialise and list tools"
    )
    drain_timeout_s: float = Field(10.0, description="time in-flight calls get to finish after a hot swap")

    snapshot_max_bytes: int = Field(
        8 * 1024**3, description="most apparent bytes (file sizes, and bytes read) one snapshot may hold"
    )
    snapshot_max_allocated_bytes: int = Field(
        8 * 1024**3, description="most allocated bytes (on disk) of the files one snapshot reads"
    )
    snapshot_max_file_bytes: int = Field(
        2 * 1024**3, gt=0, description="most apparent bytes of one file a snapshot takes"
    )
    snapshot_max_sparse_bytes: int = Field(
        64 * 1024**2,
        ge=0,
        description="most bytes in holes (sparse files) one snapshot stores as zeros; past it 413",
    )
    snapshot_timeout_s: float = Field(
        300.0, gt=0, description="longest a snapshot may take (it holds the world lock meanwhile)"
    )
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
    mcp_fast_path: bool = Field(
        True,
        description="answer tools/call and tools/list of our in-process tools below fastmcp's server "
        "machinery (same replies, ~half the CPU); false sends every /mcp request through fastmcp",
    )
    tool_names: Literal["atoll", "archipelago"] = Field(
        "atoll",
        description="'atoll': tools are always named {server}_{tool}; 'archipelago': a config with one "
        "server exposes its tools unprefixed (list_files), as Archipelago does",
    )
    coworker_model: str | None = Field(
        None,
        description="litellm model that writes the world's personas' replies (docs/coworkers.md); unset: "
        "a persona's reply says they are unavailable",
    )
    coworker_api_base: str | None = Field(None, description="endpoint of ATOLL_COWORKER_MODEL")
    coworker_api_key_secret: str | None = Field(
        None, description="name of an operator-provisioned secret for ATOLL_COWORKER_API_BASE"
    )
    coworker_thinking: Literal["off", "low", "medium", "high"] | None = Field(
        None, description="how hard the coworker model thinks (docs/models.md)"
    )
    coworker_extra_args: dict[str, Any] = Field(
        default_factory=dict, description="generation parameters of the coworker model (JSON)"
    )
    coworker_seed: int = Field(
        0, description="seed of the coworker model's replies (part of their cache key)"
    )
    coworker_max_replies: int = Field(20, ge=0, description="replies one trial (one populated world) may get")
    coworker_cache_dir: Path | None = Field(
        None, description="folder of cached persona replies, kept across runs; unset: this process only"
    )
    coworker_timeout_s: float = Field(120.0, gt=0, description="longest one coworker model call may take")
    log_level: str = Field("INFO", description="root log level of the service")
    json_logs: bool | None = Field(
        None,
        description="JSON log lines on stderr (true), readable lines (false); unset: JSON unless stderr is a "
        "terminal",
    )

    @field_validator("coworker_extra_args")
    @classmethod
    def _generation_arguments_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        from atoll.model_arguments import check_arguments

        return dict(check_arguments(value, "ATOLL_COWORKER_EXTRA_ARGS"))

    @property
    def allowed_host_list(self) -> list[str]:
        return parse_list(self.allowed_hosts)

    @property
    def url_prefixes(self) -> list[str]:
        return parse_list(self.url_allow)
