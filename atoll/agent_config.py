"""The agent's configuration: limits, model arguments, toolbelt and summarisation knobs.

The contract between the orchestrator (an experiment's ``agents[].config`` plus its limits)
and the agents runner (in-process or ``POST /runs``): one pydantic model shared by every
agent; an agent ignores what it does not use.  The trajectory records it (``agent_config``),
so it never holds secrets: API keys come from the provider's usual environment variables or
an operator-provisioned secret named apart from it (``api_key_secret``), ``extra_args`` holds
generation parameters only (:mod:`atoll.model_arguments`), the gateway token is a separate
argument.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from atoll.model_arguments import check_arguments


class AgentConfig(BaseModel):
    """Everything that shapes an agent run besides the task, the model and the endpoints."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # --- limits -------------------------------------------------------------------------
    max_steps: int = Field(250, ge=1, description="Model turns before the run ends with max_steps")
    timeout_s: float = Field(3600.0, gt=0, description="Wall-clock limit of the whole run")
    tool_call_timeout_s: float = Field(120.0, gt=0, description="Limit of one tool call")
    llm_timeout_s: float = Field(600.0, gt=0, description="Limit of one model request")
    token_budget: int | None = Field(
        None,
        ge=1,
        validation_alias=AliasChoices("token_budget", "max_tokens"),
        description="Prompt+completion tokens of the run; it ends with budget_exhausted past it",
    )
    cost_budget_usd: float | None = Field(
        None,
        gt=0,
        validation_alias=AliasChoices("cost_budget_usd", "max_cost_usd"),
        description="USD of the run; it ends with budget_exhausted past it",
    )
    limit_warning_steps: int = Field(
        10, ge=0, description="Tell the model its remaining steps when this few or fewer are left"
    )
    limit_warning_fraction: float = Field(
        0.1, ge=0, le=1, description="Tell the model its remaining time when this share of it is left"
    )
    max_consecutive_malformed: int = Field(
        5, ge=1, description="Turns in a row with malformed tool calls before error(agent)"
    )
    max_text_only_replies: int = Field(
        3, ge=1, description="react_toolbelt: replies without a tool call in a row before the run fails"
    )

    # --- model --------------------------------------------------------------------------
    api_base: str | None = Field(None, description="OpenAI-compatible endpoint (run_agent's api_base wins)")
    thinking: Literal["off", "low", "medium", "high"] | None = Field(
        None, description="How hard the model thinks, mapped for its provider (docs/models.md)"
    )
    reasoning_effort: str | None = Field(
        None, description="Passed to litellm as is (prefer thinking, which is mapped per provider)"
    )
    stream: bool = Field(False, description="Stream responses (keeps long generations' connections busy)")
    temperature: float | None = None
    max_completion_tokens: int | None = Field(None, ge=1)
    extra_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Generation parameters passed to litellm.acompletion (temperature, top_p, …; "
        "never endpoints, keys, fallbacks or headers)",
    )
    context_window: int | None = Field(
        None, ge=256, description="Model window in tokens; default from litellm's model map"
    )
    default_context_window: int = Field(128_000, ge=256, description="Window when litellm does not know it")
    supports_images: bool | None = Field(
        None, description="Send tool images to the model; None = ask litellm"
    )
    input_cost_per_token: float | None = Field(None, ge=0, description="Price override for unmapped models")
    output_cost_per_token: float | None = Field(None, ge=0)
    cache_read_cost_per_token: float | None = Field(
        None, ge=0, description="Price of a cached prompt token with the override (None: the input price)"
    )
    cache_write_cost_per_token: float | None = Field(
        None,
        ge=0,
        description="Price of a prompt token written to the cache with the override (None: the input price)",
    )

    # --- retries (model calls only) -----------------------------------------------------
    max_retries: int = Field(6, ge=0, description="Retries of one model call on transient errors")
    retry_budget: int = Field(30, ge=0, description="Retries of all model calls of a run together")
    retry_initial_wait_s: float = Field(1.0, ge=0)
    retry_max_wait_s: float = Field(60.0, ge=0, description="Cap of one wait, Retry-After included")

    # --- tools --------------------------------------------------------------------------
    tool_result_max_chars: int = Field(
        20_000, ge=200, description="Longer tool results are cut; the omitted span is stated"
    )
    # react_toolbelt sends its 6 meta-tools and the toolbelt: 122 keeps a request within
    # OpenAI's 128 tools (atoll.tool_schemas.MAX_TOOLS; tests/agents_runner/test_react_toolbelt.py).
    toolbelt_size: int = Field(
        30, ge=1, le=122, description="react_toolbelt: most gateway tools held at once (at most 122)"
    )
    initial_toolbelt: list[str] = Field(default_factory=list, description="Tools in the toolbelt at start")
    system_prompt: str | None = Field(None, description="Replaces the agent's default system prompt")
    system_prompt_suffix: str | None = Field(None, description="Appended to the system prompt")

    # --- summarisation ------------------------------------------------------------------
    summarize_at: float = Field(
        0.70, gt=0, le=1, description="Compact when the context passes this share of the window"
    )
    keep_last_messages: int = Field(10, ge=0, description="Messages kept verbatim after compaction")
    evidence_share: float = Field(
        0.25, gt=0, le=0.6, description="Share of the window the carried tool evidence may fill"
    )

    # --- recording ----------------------------------------------------------------------
    record_raw: bool = Field(
        False,
        description="Record each model call's request as sent to litellm (no key) and its raw "
        "response, stored beside the trajectory as raw_model_calls.jsonl (off: it is large)",
    )
    record_raw_max_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="record_raw: bytes of exchanges kept per run; later ones are noted as omitted",
    )

    # --- replay -------------------------------------------------------------------------
    replay_stop_on_error: bool = Field(True, description="replay: a failing reference step fails the run")

    @field_validator("extra_args")
    @classmethod
    def _generation_arguments_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        return dict(check_arguments(value, "extra_args"))


def load_agent_config(value: AgentConfig | dict[str, Any] | None) -> AgentConfig:
    """Validate ``value`` into an :class:`AgentConfig` (``None`` = defaults).

    Raises ``pydantic.ValidationError`` naming the bad field."""
    if value is None:
        return AgentConfig()
    if isinstance(value, AgentConfig):
        return value
    return AgentConfig.model_validate(value)


__all__ = ["AgentConfig", "load_agent_config"]
