"""The retry policy of model calls (agent and judge alike), on :mod:`atoll.retry`.

Only ``transient`` and ``rate_limited`` errors are retried (see :mod:`atoll.llm.errors`).
A wait honours the provider's ``Retry-After`` once (capped at ``max_wait_s``), else it is
exponential backoff with jitter. Three bounds keep a failing provider from stalling work:
``max_retries`` per call, a :class:`RetryBudget` shared by every call of one agent run or
one grading, and ``deadline_s`` over one call's attempts and waits together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atoll.retry import parse_retry_after


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms``, or ``Retry-After`` as
    seconds or an HTTP date: :func:`atoll.retry.parse_retry_after`), found anywhere in the
    exception chain; None when absent."""
    current: BaseException | None = exc
    for _ in range(20):
        if current is None:
            return None
        waited = parse_retry_after(_headers(current))
        if waited is not None:
            return waited
        current = current.__cause__ or current.__context__
    return None


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    return headers or getattr(exc, "litellm_response_headers", None)


class RetryBudget:
    """Retries left for a whole unit of work (one agent run, one grading)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    @property
    def left(self) -> int:
        return self.total - self.used


@dataclass
class RetryPolicy:
    """How one model call is retried; see the module docstring."""

    max_retries: int = 4
    initial_wait_s: float = 1.0
    max_wait_s: float = 60.0
    deadline_s: float | None = None
    budget: RetryBudget = field(default_factory=lambda: RetryBudget(30))
