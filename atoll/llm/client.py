"""``complete()``: the one way atoll calls a model (the agent runner and the judge alike).

Any litellm provider string works (``openai/gpt-4o``, ``anthropic/…``, ``hosted_vllm/…``);
``api_base`` points at OpenAI-compatible servers (vLLM, llama.cpp, Ollama, the scripted test
server). Every call holds a slot of the process's per-provider window and records its cost
in the process's ledger (:mod:`atoll.llm.limits`), is retried by :mod:`atoll.llm.retry`, is
bounded by a per-attempt timeout that atoll enforces itself (a server that accepts the
connection and never answers cannot hold a caller past it), and fails only with
:class:`~atoll.llm.errors.ModelError`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map at import

import litellm  # noqa: E402

from atoll.llm.arguments import argument_problem  # noqa: E402
from atoll.llm.endpoints import KeyRefused, call_key, redact  # noqa: E402
from atoll.llm.errors import ModelError, ModelErrorKind, classify  # noqa: E402
from atoll.llm.limits import CostLedger, ProviderLimiter, provider_of, shared_ledger, shared_limiter  # noqa: E402
from atoll.llm.retry import RetryPolicy  # noqa: E402
from atoll.llm.usage import token_counts  # noqa: E402

litellm.suppress_debug_info = True


def resolve_api_key(model: str, api_base: str | None, api_key: str | None) -> str | None:
    """The key to send to ``api_base`` for ``model`` (:func:`atoll.llm.endpoints.call_key`):
    ``api_key`` when given; None when the provider's environment key may go there (litellm reads
    it); a placeholder for an OpenAI-compatible endpoint off the allow-list, or a listed one while
    no key is set (local servers such as vLLM, llama.cpp and Ollama take any key, but the openai
    client refuses to send a request without one). Raises KeyRefused."""
    return call_key(model, api_base, api_key=api_key)


@dataclass(frozen=True)
class Endpoint:
    """A model, where it answers and which key goes with it; the key never shows in ``repr``.

    ``api_key`` is the caller's own key for this endpoint; ``secret`` names an
    operator-provisioned secret bound to it; ``key_env`` a variable of the service's settings.
    Which of them (or the provider's environment key) is sent is decided by
    :func:`atoll.llm.endpoints.call_key` on every call."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    secret: str | None = None
    key_env: str | None = None

    @property
    def url(self) -> str:
        provider = provider_of(self.model)
        return self.api_base or f"{provider}'s default endpoint"


@dataclass
class Completion:
    """A successful call: litellm's response, its cost, and what it took to get it."""

    response: Any
    cost_usd: float
    retries: int = 0
    duration_s: float = 0.0
    recovered_from: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.response.choices[0].message.content or ""

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of the response's ``usage`` (0 when the server reported none)."""
        return int(getattr(getattr(self.response, "usage", None), "prompt_tokens", 0) or 0)

    @property
    def completion_tokens(self) -> int:
        return int(getattr(getattr(self.response, "usage", None), "completion_tokens", 0) or 0)

    @property
    def reasoning_tokens(self) -> int:
        """Of the completion tokens, the reasoning (see :func:`atoll.llm.usage.token_counts`)."""
        return token_counts(self.response)["reasoning_tokens"]

    @property
    def cached_tokens(self) -> int:
        """Of the prompt tokens, those read from the provider's prompt cache."""
        return token_counts(self.response)["cached_tokens"]


def response_cost(response: Any, model: str) -> float:
    """USD of a response from litellm's price map; 0 for models it does not price."""
    hidden = getattr(response, "_hidden_params", {}) or {}
    if hidden.get("response_cost"):
        return float(hidden["response_cost"])
    try:
        return float(litellm.completion_cost(completion_response=response, model=model) or 0.0)
    except Exception:  # noqa: BLE001 - model not in litellm's price map: cost unknown, counted as 0
        return 0.0


async def complete(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    *,
    role: str = "agent",
    tools: list[dict[str, Any]] | None = None,
    arguments: dict[str, Any] | None = None,
    timeout_s: float = 600.0,
    retry: RetryPolicy | None = None,
    stream: bool = False,
    cost: Callable[[Any], float] | None = None,
    on_retry: Callable[[ModelError], None] | None = None,
    limiter: ProviderLimiter | None = None,
    ledger: CostLedger | None = None,
) -> Completion:
    """One chat completion through litellm, retried on transient errors and rate limits.

    ``arguments`` go to ``litellm.acompletion`` verbatim (temperature, response_format,
    tool_choice, …). ``timeout_s`` bounds each attempt; ``retry`` (default
    :class:`RetryPolicy`) bounds the retries. ``cost`` prices a response (default: litellm's
    price map). Raises :class:`ModelError`: ``configuration``, ``content`` and
    ``context_window`` at once, ``transient``/``rate_limited`` once retries, the retry budget
    or the deadline run out, ``cost_ceiling`` (nothing sent) when the ledger is spent."""
    policy = retry or RetryPolicy()
    limiter = limiter or shared_limiter()
    ledger = ledger or shared_ledger()
    provider = provider_of(endpoint.model)
    started = time.monotonic()
    deadline = started + policy.deadline_s if policy.deadline_s else None
    recovered: list[str] = []
    attempt = 0
    key = _checked_key(endpoint, arguments or {})
    while True:
        if ledger.exhausted():
            raise ModelError(
                ModelErrorKind.cost_ceiling,
                model=endpoint.model,
                api_base=endpoint.api_base,
                message=f"the cost ceiling of ${ledger.ceiling_usd:g} is reached; call not sent",
                retries=attempt,
            )
        attempt_timeout = (
            timeout_s if deadline is None else max(0.001, min(timeout_s, deadline - time.monotonic()))
        )
        try:
            async with limiter.slot(provider):
                try:
                    async with asyncio.timeout(attempt_timeout):
                        response = await _call(
                            endpoint, key, messages, tools, arguments or {}, attempt_timeout, stream
                        )
                except TimeoutError:
                    raise ModelError(
                        ModelErrorKind.transient,
                        model=endpoint.model,
                        api_base=endpoint.api_base,
                        message=f"no answer within {attempt_timeout:g} s",
                    ) from None
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none escapes raw
            error = classify(exc, model=endpoint.model, api_base=endpoint.api_base)
            error.message = redact(error.message)  # a provider may echo the key it was sent
            if error.kind is ModelErrorKind.rate_limited:
                await limiter.report(provider, rate_limited=True)
            wait = policy.wait_s(attempt + 1, error.retry_after_s)
            out_of_time = deadline is not None and time.monotonic() + wait >= deadline
            if not error.retryable or attempt >= policy.max_retries or policy.budget.left <= 0 or out_of_time:
                error.retries = attempt
                if error.retryable and policy.budget.left <= 0:
                    error.message += " (retry budget spent)"
                elif error.retryable and out_of_time:
                    error.message += f" (deadline of {policy.deadline_s:g} s)"
                raise error from (None if error is exc else exc)
            attempt += 1
            policy.budget.used += 1
            recovered.append(f"{error.kind.value}: {error.message}")
            if on_retry is not None:
                on_retry(error)
            await asyncio.sleep(wait)
            continue
        await limiter.report(provider, rate_limited=False)
        spent = cost(response) if cost is not None else response_cost(response, endpoint.model)
        ledger.record(role, spent)
        return Completion(
            response=response,
            cost_usd=spent,
            retries=attempt,
            duration_s=time.monotonic() - started,
            recovered_from=recovered,
        )


def _checked_key(endpoint: Endpoint, arguments: dict[str, Any]) -> str | None:
    """The key for this call; ModelError(configuration), nothing sent, when the arguments or
    the endpoint would carry a key where it may not go."""
    problem = argument_problem(arguments, "arguments")
    try:
        if problem:
            raise KeyRefused(problem)
        return call_key(
            endpoint.model,
            endpoint.api_base,
            api_key=endpoint.api_key,
            secret=endpoint.secret,
            key_env=endpoint.key_env,
        )
    except KeyRefused as refused:
        raise ModelError(
            ModelErrorKind.configuration,
            model=endpoint.model,
            api_base=endpoint.api_base,
            message=refused.message,
        ) from None


async def _call(
    endpoint: Endpoint,
    key: str | None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    extra: dict[str, Any],
    timeout_s: float,
    stream: bool,
) -> Any:
    call: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [dict(message) for message in messages],  # providers' adapters may edit them
        "timeout": timeout_s,
        "num_retries": 0,
        "max_retries": 0,  # one retry policy: ours, not litellm's or the openai client's
    }
    if tools:
        call["tools"] = tools
    call.update(extra)  # generation parameters only (checked): never an endpoint or a key
    if endpoint.api_base:
        call["api_base"] = endpoint.api_base
    if key:
        call["api_key"] = key
    if not stream:
        return await litellm.acompletion(**call)
    # Streaming keeps the connection busy during long generations (proxies drop idle
    # connections); the chunks are rebuilt into one response, usage included.
    call.update(stream=True, stream_options={"include_usage": True})
    chunks = [chunk async for chunk in await litellm.acompletion(**call)]
    return litellm.stream_chunk_builder(chunks, messages=messages)
