"""Settings of the agents runner service, read from ``ATOLL_AGENT_*`` environment variables."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from atoll.settings import AtollSettings, require_non_empty


class AgentRunnerSettings(AtollSettings):
    """``ATOLL_AGENT_HOST``, ``ATOLL_AGENT_PORT``, ``ATOLL_AGENT_TOKEN``, ``ATOLL_AGENT_KEEP_RUNS``,
    ``ATOLL_AGENT_KEEP_BYTES``, ``ATOLL_AGENT_MAX_RUNNING``, ``ATOLL_AGENT_MAX_BODY_BYTES``,
    ``ATOLL_AGENT_GATEWAY_ALLOW``."""

    model_config = SettingsConfigDict(env_prefix="ATOLL_AGENT_")

    host: str = Field("127.0.0.1", description="bind address (0.0.0.0 in a container)")
    port: int = Field(8081, gt=0, lt=65536)
    token: SecretStr | None = Field(
        None, description="bearer token every endpoint but /health requires; required beyond loopback"
    )
    keep_runs: int = Field(1000, ge=1, description="finished runs kept in memory for polling")
    keep_bytes: int = Field(
        512 * 1024**2,
        ge=1024**2,
        description="finished runs' trajectories kept in memory, in bytes of JSON (oldest dropped first)",
    )
    max_running: int = Field(
        64, ge=1, description="runs running at once; POST /runs beyond it is 429 too_many_runs"
    )
    gateway_allow: str = Field(
        "",
        description="comma-separated URLs a run's gateway_url must be at or below (scheme, host and "
        "port exact, path prefix); empty = any http(s) URL. Set it on a shared runner: the runner "
        "connects to whatever gateway_url names, so a submitter could point it at internal services",
    )
    # Parsing JSON holds the interpreter (about 0.1 s per MiB on a busy machine, /health waits):
    # keep it to what a run request needs.
    max_body_bytes: int = Field(
        1024**2, ge=1024, description="largest request body (a run request: task, messages, config)"
    )

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_AGENT_TOKEN")
