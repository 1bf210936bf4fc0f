"""The one retry policy for model calls.

Retried: rate limits (429, honouring ``Retry-After``), server errors (5xx), timeouts and
connection failures.  Never retried: deterministic 4xx (bad request, auth, not found, context
window), which would fail the same way again.  Every retry also draws on a per-run budget so a
provider that keeps failing cannot stall a run for hours.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import litellm
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

T = TypeVar("T")

_TRANSIENT = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.APIConnectionError,
    litellm.Timeout,
)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: 429, 5xx, timeouts, connection failures."""
    if isinstance(exc, litellm.ContextWindowExceededError):
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``Retry-After``: seconds or an HTTP date)."""
    headers = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class RetryBudget:
    """Retries left for a whole run; shared by every model call of that run."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    @property
    def left(self) -> int:
        return self.total - self.used


class RetryPolicy:
    """Wait and stop rules for one run's model calls."""

    def __init__(
        self, *, max_retries: int, budget: RetryBudget, initial_wait_s: float, max_wait_s: float
    ) -> None:
        self.max_retries = max_retries
        self.budget = budget
        self.initial_wait_s = initial_wait_s
        self.max_wait_s = max_wait_s

    def wait_s(self, attempt: int, exc: BaseException | None) -> float:
        """Retry-After when given (capped), else exponential backoff with full jitter."""
        asked = retry_after_s(exc) if exc is not None else None
        if asked is not None:
            return min(asked, self.max_wait_s)
        ceiling = min(self.max_wait_s, self.initial_wait_s * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling)

    async def call(
        self,
        operation: Callable[..., Awaitable[T]],
        *args: Any,
        on_retry: Callable[[BaseException], None],
    ) -> T:
        """Await ``operation(*args)`` with retries; re-raises the last error when retries or budget run out."""

        def should_retry(exc: BaseException) -> bool:
            return is_transient(exc) and self.budget.left > 0

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return self.wait_s(state.attempt_number, exc)

        def before_sleep(state: RetryCallState) -> None:
            self.budget.used += 1
            exc = state.outcome.exception() if state.outcome else None
            if exc is not None:
                on_retry(exc)

        retrying = AsyncRetrying(
            retry=retry_if_exception(should_retry),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(operation, *args)
