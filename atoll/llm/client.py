"""``complete()``: the one way atoll calls a model (the agent runner and the judge alike).

Any litellm provider string works (``openai/gpt-4o``, ``anthropic/…``, ``hosted_vllm/…``);
``api_base`` points at OpenAI-compatible servers (vLLM, llama.cpp, Ollama, the scripted test
server). Every call holds a slot of the process's per-provider window and records its cost
in the process's ledger (:mod:`atoll.llm.limits`), is retried by :mod:`atoll.llm.retry` (on :mod:`atoll.retry`), is
bounded by a per-attempt timeout that atoll enforces itself (a server that accepts the
connection and never answers cannot hold a caller past it), and fails only with
:class:`~atoll.llm.errors.ModelError`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from atoll.settings import set_default

set_default("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map at import

import litellm  # noqa: E402
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception  # noqa: E402

from atoll import telemetry  # noqa: E402
from atoll.llm.endpoints import KeyRefused, call_key, redact  # noqa: E402
from atoll.llm.errors import ModelError, ModelErrorKind, classify  # noqa: E402
from atoll.llm.limits import CostLedger, ProviderLimiter, provider_of, shared_ledger, shared_limiter  # noqa: E402
from atoll.llm.retry import RetryPolicy  # noqa: E402
from atoll.llm.usage import token_counts  # noqa: E402
from atoll.model_arguments import argument_problem  # noqa: E402
from atoll.retry import backoff, wait_retry_after  # noqa: E402

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
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> Completion:
    """One chat completion through litellm, retried on transient errors and rate limits.

    ``arguments`` go to ``litellm.acompletion`` verbatim (temperature, response_format,
    tool_choice, …). ``timeout_s`` bounds each attempt; ``retry`` (default
    :class:`RetryPolicy`) bounds the retries. ``cost`` prices a response (default: litellm's
    price map). Raises :class:`ModelError`: ``configuration``, ``content`` and
    ``context_window`` at once, ``transient``/``rate_limited`` once retries, the retry budget
    or the deadline run out, ``cost_ceiling`` (nothing sent) when the ledger is spent.
    ``on_request`` is called with each attempt's ``litellm.acompletion`` arguments as sent, less
    the key (``api_key`` and any header is never in what it is given).

    With traces on (:mod:`atoll.telemetry`), the call and its retries are one ``chat {model}``
    span carrying the GenAI attributes (model, provider, token usage, finish reasons)."""
    call = functools.partial(
        _complete,
        endpoint,
        messages,
        role=role,
        tools=tools,
        arguments=arguments,
        timeout_s=timeout_s,
        retry=retry,
        stream=stream,
        cost=cost,
        on_retry=on_retry,
        limiter=limiter,
        ledger=ledger,
        on_request=on_request,
    )
    if not telemetry.ENABLED:
        return await call()
    with telemetry.chat_span(
        model=endpoint.model,
        provider=provider_of(endpoint.model),
        api_base=endpoint.api_base,
        role=role,
        arguments=arguments,
        stream=stream,
    ) as current:
        try:
            done = await call()
        except ModelError as error:
            telemetry.mark_error(current, error.kind.value, error.message)
            raise
        telemetry.record_completion(current, done)
        return done


async def _complete(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    *,
    role: str,
    tools: list[dict[str, Any]] | None,
    arguments: dict[str, Any] | None,
    timeout_s: float,
    retry: RetryPolicy | None,
    stream: bool,
    cost: Callable[[Any], float] | None,
    on_retry: Callable[[ModelError], None] | None,
    limiter: ProviderLimiter | None,
    ledger: CostLedger | None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> Completion:
    policy = retry or RetryPolicy()
    limiter = limiter or shared_limiter()
    ledger = ledger or shared_ledger()
    provider = provider_of(endpoint.model)
    started = time.monotonic()
    deadline = started + policy.deadline_s if policy.deadline_s else None
    recovered: list[str] = []
    key = _checked_key(endpoint, arguments or {})
    why_stopped = ""

    async def attempt_once(retries: int) -> Any:
        if ledger.exhausted():
            raise ModelError(
                ModelErrorKind.cost_ceiling,
                model=endpoint.model,
                api_base=endpoint.api_base,
                message=f"the cost ceiling of ${ledger.ceiling_usd:g} is reached; call not sent",
                retries=retries,
            )
        attempt_timeout = (
            timeout_s if deadline is None else max(0.001, min(timeout_s, deadline - time.monotonic()))
        )
        try:
            async with limiter.slot(provider):
                try:
                    async with asyncio.timeout(attempt_timeout):
                        response = await _call(
                            endpoint,
                            key,
                            messages,
                            tools,
                            arguments or {},
                            attempt_timeout,
                            stream,
                            on_request,
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
            raise error from (None if error is exc else exc)
        await limiter.report(provider, rate_limited=False)
        return response

    def stop(state: RetryCallState) -> bool:
        nonlocal why_stopped
        if policy.budget.left <= 0:
            why_stopped = " (retry budget spent)"
        elif deadline is not None and time.monotonic() + state.upcoming_sleep >= deadline:
            why_stopped = f" (deadline of {policy.deadline_s:g} s)"
        return bool(why_stopped) or state.attempt_number > policy.max_retries

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(error, ModelError)
        policy.budget.used += 1
        recovered.append(f"{error.kind.value}: {error.message}")
        if on_retry is not None:
            on_retry(error)

    retrying = AsyncRetrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, ModelError) and exc.retryable),
        wait=wait_retry_after(backoff(policy.initial_wait_s, policy.max_wait_s), policy.max_wait_s),
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )
    tries = 0
    try:
        async for attempt in retrying:
            with attempt:
                tries = attempt.retry_state.attempt_number
                response = await attempt_once(tries - 1)
    except ModelError as error:
        error.retries = tries - 1
        if error.retryable:
            error.message += why_stopped
        raise
    spent = cost(response) if cost is not None else response_cost(response, endpoint.model)
    ledger.record(role, spent)
    return Completion(
        response=response,
        cost_usd=spent,
        retries=len(recovered),
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


# Arguments a recording of the request leaves out: credentials (the key is added after it).
_NEVER_RECORDED = frozenset(
    {"api_key", "headers", "extra_headers", "aws_secret_access_key", "azure_ad_token"}
)


async def _call(
    endpoint: Endpoint,
    key: str | None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    extra: dict[str, Any],
    timeout_s: float,
    stream: bool,
    on_request: Callable[[dict[str, Any]], None] | None = None,
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
    if stream:
        call.update(stream=True, stream_options={"include_usage": True})
    if on_request is not None:
        # Before the key is added: what a recording keeps never holds it.
        on_request({name: value for name, value in call.items() if name not in _NEVER_RECORDED})
    if key:
        call["api_key"] = key
    if not stream:
        return await litellm.acompletion(**call)
    # Streaming keeps the connection busy during long generations (proxies drop idle
    # connections); the chunks are rebuilt into one response, usage included.
    chunks = [chunk async for chunk in await litellm.acompletion(**call)]
    return litellm.stream_chunk_builder(chunks, messages=messages)
