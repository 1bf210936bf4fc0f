"""Settings of the grading service, read from ``ATOLL_GRADER_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from atoll.settings import AtollSettings, require_non_empty, secret_text
from grader.judge import JudgeConfig


class GraderSettings(AtollSettings):
    """The service's defaults: ``ATOLL_GRADER_JUDGE_MODEL``, ``ATOLL_GRADER_API_BASE``,
    ``ATOLL_GRADER_API_KEY_ENV``, ``ATOLL_GRADER_CACHE``, ``ATOLL_GRADER_HOST``,
    ``ATOLL_GRADER_PORT``, ``ATOLL_GRADER_SAMPLES``, ``ATOLL_GRADER_CONTEXT_BUDGET_CHARS``,
    ``ATOLL_GRADER_ALLOWED_API_BASES``, ``ATOLL_GRADER_TOKEN``, ``ATOLL_GRADER_MAX_BODY_BYTES``, ``ATOLL_GRADER_MAX_CONCURRENT``.
    Command-line options override them."""

    model_config = SettingsConfigDict(env_prefix="ATOLL_GRADER_")

    judge_model: str | None = Field(
        None, description="litellm model of the default judge; none = checks only"
    )
    api_base: str | None = Field(None, description="OpenAI-compatible base URL of the judge")
    api_key_env: str | None = Field(None, description="name of the variable that holds the judge's key")
    samples: int = Field(1, ge=1, description="judge samples per criterion (majority)")
    context_budget_chars: int | None = Field(
        None, ge=1_000, description="evidence characters per prompt (default: from the model's window)"
    )
    allowed_api_bases: str = Field(
        "",
        description="comma-separated judge endpoints a /grade request may choose besides api_base "
        "(any other is refused: the service's keys go nowhere a caller picks)",
    )
    cache: Path | None = Field(None, description="verdict cache: .sqlite file or directory")
    host: str = "127.0.0.1"
    port: int = 8082
    token: SecretStr | None = Field(
        None, description="bearer token POST /grade requires; required beyond loopback"
    )
    max_body_bytes: int = Field(
        4 * 1024**3,
        ge=1024,
        description="largest POST /grade body (both snapshots and the JSON fields)",
    )
    max_concurrent: int = Field(
        2,
        ge=1,
        description="grades worked on at once (each reads up to 512 MiB of changed files); "
        "more wait their turn",
    )

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return require_non_empty(value, "ATOLL_GRADER_TOKEN")

    def token_text(self) -> str | None:
        """The token as text (None: no token, which only loopback allows)."""
        return secret_text(self.token)

    def allowed_judge_endpoints(self) -> frozenset[str]:
        return frozenset(base.strip() for base in self.allowed_api_bases.split(",") if base.strip())

    def judge(self) -> JudgeConfig | None:
        if not self.judge_model:
            return None
        return JudgeConfig(
            model=self.judge_model,
            api_base=self.api_base,
            api_key_env=self.api_key_env,
            samples=self.samples,
            context_budget_chars=self.context_budget_chars,
        )
