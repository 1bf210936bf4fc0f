"""The agent's model: usage, cost, budgets and context window over :func:`atoll.llm.complete`.

The call itself (retries, timeouts, error classes, the per-provider limiter and the cost
ledger shared with the judge) is :mod:`atoll.llm`'s.  Errors leave this module as
:class:`ModelProviderError` (ends the run with ``error``/``model_provider``; its ``kind`` is the
:class:`~atoll.llm.ModelErrorKind`), :class:`ContextWindowExceeded` (the caller compacts and
retries) or :class:`BudgetExhausted`.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import litellm

from agents_runner.config import AgentConfig
from agents_runner.conversation import assistant_turn
from agents_runner.raw import RawRecorder
from atoll.errors import AtollError, CodedError, ErrorCode
from atoll.llm import (
    Endpoint,
    ModelError,
    ModelErrorKind,
    RetryBudget,
    RetryPolicy,
    complete,
    response_cost,
    token_counts,
)
from atoll.llm.profiles import ProfileError, agent_arguments
from atoll.trajectory import ModelCall, Usage


class ModelProviderError(AtollError):
    """The model provider failed deterministically or past all retries; ``kind`` says how."""

    def __init__(self, message: str, kind: ModelErrorKind) -> None:
        super().__init__(ErrorCode.model_provider, message)
        self.kind = kind


class ContextWindowExceeded(CodedError):
    """The prompt did not fit the model's context window."""

    code = ErrorCode.context_window_exceeded


class BudgetExhausted(CodedError):
    """The run's token or USD budget is spent."""

    code = ErrorCode.budget_exhausted


@dataclass
class ModelReply:
    """One assistant turn and what it cost: ``message`` is sent back to the model as litellm
    returned it (thinking blocks, signatures, reasoning items: :mod:`agents_runner.conversation`),
    ``record`` is its transcript form, ``tool_calls`` the calls in OpenAI form."""

    message: dict[str, Any]
    record: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    reasoning: str | None = None  # the reasoning text the provider returned, if any


class ModelClient:
    """Calls one model for one run, recording every call and enforcing the run's budgets."""

    def __init__(
        self,
        model: str,
        config: AgentConfig,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_secret: str | None = None,
    ):
        self.model = model
        self.config = config
        self.api_base = api_base
        self.api_key = api_key
        self.calls: list[ModelCall] = []
        self.usage = Usage()
        self.retry_budget = RetryBudget(config.retry_budget)
        self._policy = RetryPolicy(
            max_retries=config.max_retries,
            budget=self.retry_budget,
            initial_wait_s=config.retry_initial_wait_s,
            max_wait_s=config.retry_max_wait_s,
        )
        self._endpoint = Endpoint(model, api_base, api_key, secret=api_key_secret)
        self.raw = RawRecorder(config.record_raw_max_bytes, secrets=(api_key,)) if config.record_raw else None
        self._info = _model_info(model)
        self._seen_call_ids: set[str] = set()

    def restore(self, *, calls: list[ModelCall], usage: Usage, retries: int, call_ids: set[str]) -> None:
        """Continue from a checkpoint: its calls, usage and retries count once, and tool-call ids
        already used stay reserved."""
        self.calls = calls
        self.usage = usage
        self.retry_budget.used = retries
        self._seen_call_ids = set(call_ids)

    # --- model facts --------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        if self.config.context_window:
            return self.config.context_window
        known = self._info.get("max_input_tokens") or self._info.get("max_tokens")
        return int(known) if known else self.config.default_context_window

    @property
    def supports_images(self) -> bool:
        if self.config.supports_images is not None:
            return self.config.supports_images
        return bool(self._info.get("supports_vision"))

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        """Prompt size estimate (litellm's tokenizer for the model, tiktoken otherwise)."""
        try:
            return int(litellm.token_counter(model=self.model, messages=messages, tools=tools or None))
        except Exception:  # unknown content shapes: fall back to ~4 characters a token
            return len(str(messages)) // 4 + len(str(tools or "")) // 4

    # --- budgets ------------------------------------------------------------------------

    def check_budget(self) -> None:
        """Raise :class:`BudgetExhausted` when a configured budget is spent."""
        if self.config.token_budget is not None and self.usage.total_tokens >= self.config.token_budget:
            raise BudgetExhausted(
                f"token budget spent: {self.usage.total_tokens} of {self.config.token_budget} tokens"
            )
        if self.config.cost_budget_usd is not None and self.usage.cost_usd >= self.config.cost_budget_usd:
            raise BudgetExhausted(
                f"cost budget spent: ${self.usage.cost_usd:.4f} of ${self.config.cost_budget_usd:.4f}"
            )

    # --- the call -----------------------------------------------------------------------

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, step: int
    ) -> ModelReply:
        """One chat completion (retried on transient errors by :func:`atoll.llm.complete`).

        Raises :class:`BudgetExhausted` before calling when a budget (the run's, or the shared
        cost ceiling) is spent, :class:`ContextWindowExceeded` when the prompt is too long, and
        :class:`ModelProviderError` for any other provider failure."""
        self.check_budget()
        record = ModelCall(step=step, model=self.model)
        self.calls.append(record)
        try:
            arguments = self._arguments()
        except ProfileError as error:
            record.error = _short(str(error))
            raise ModelProviderError(str(error), ModelErrorKind.configuration) from error
        started = time.monotonic()

        def on_retry(error: ModelError) -> None:
            record.retries += 1
            record.error = f"{error.kind.value}: {_short(error.message)}"

        try:
            done = await complete(
                self._endpoint,
                # litellm's provider adapters may edit nested parts of what they are given; the
                # run's context (signed thinking blocks included) must stay exactly as it was.
                copy.deepcopy(messages),
                role="agent",
                tools=tools,
                arguments=arguments,
                timeout_s=self.config.llm_timeout_s,
                retry=self._policy,
                stream=self.config.stream,
                cost=self._cost,
                on_retry=on_retry,
                on_request=self.raw.request if self.raw is not None else None,
            )
        except ModelError as error:
            record.error = _short(str(error))
            if self.raw is not None:
                self.raw.add(step, error=str(error), retries=record.retries)
            if error.kind is ModelErrorKind.context_window:
                raise ContextWindowExceeded(_short(error.message)) from error
            if error.kind is ModelErrorKind.cost_ceiling:
                raise BudgetExhausted(error.message) from error
            raise ModelProviderError(_short(str(error)), error.kind) from error
        finally:
            record.duration_s = round(time.monotonic() - started, 4)
        record.error = None if record.error is None else f"recovered from {record.error}"
        if self.raw is not None:
            self.raw.add(step, response=done.response, retries=record.retries)
        usage = self._usage(done.response, done.cost_usd)
        record.usage = usage
        self.usage = self.usage + usage
        return _reply(done.response, usage, self._seen_call_ids)

    def _arguments(self) -> dict[str, Any]:
        """The litellm arguments of every call: the agent's configuration through the model's
        parameter profile (thinking mapped per provider; refused parameters raise
        :class:`~atoll.llm.profiles.ProfileError`, which loading the experiment reports first)."""
        return agent_arguments(self.model, self.config)

    def _usage(self, response: Any, cost_usd: float) -> Usage:
        return Usage(**token_counts(response), cost_usd=cost_usd)

    def _cost(self, response: Any) -> float:
        """USD of a response: the configured per-token prices when any is set, else litellm's."""
        config = self.config
        if config.input_cost_per_token is None and config.output_cost_per_token is None:
            return response_cost(response, self.model)
        tokens = token_counts(response)
        input_price = config.input_cost_per_token or 0.0
        read_price = (
            input_price if config.cache_read_cost_per_token is None else config.cache_read_cost_per_token
        )
        write_price = (
            input_price if config.cache_write_cost_per_token is None else config.cache_write_cost_per_token
        )
        uncached = max(0, tokens["prompt_tokens"] - tokens["cached_tokens"] - tokens["cache_write_tokens"])
        return (
            uncached * input_price
            + tokens["cached_tokens"] * read_price
            + tokens["cache_write_tokens"] * write_price
            + tokens["completion_tokens"] * (config.output_cost_per_token or 0.0)
        )


def _model_info(model: str) -> dict[str, Any]:
    try:
        return dict(litellm.get_model_info(model))
    except Exception:
        return {}


def _reply(response: Any, usage: Usage, seen_ids: set[str]) -> ModelReply:
    turn = assistant_turn(response.choices[0].message, seen_ids)
    return ModelReply(
        message=turn.message,
        record=turn.record,
        tool_calls=turn.tool_calls,
        usage=usage,
        reasoning=turn.reasoning,
    )


def _short(exc: BaseException | str, limit: int = 500) -> str:
    text = str(exc).replace("\n", " ").strip()
    return text if len(text) <= limit else text[:limit] + "…"
