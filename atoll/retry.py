"""The one retry mechanism: exponential backoff, a server's ``Retry-After``, and the tenacity
pieces every retrying caller is built from (model calls, the Kubernetes API, webhooks, the
trial store, the scheduler's infra retries).

- :func:`parse_retry_after` reads what a server asked for from its response headers:
  ``retry-after-ms`` (OpenAI-compatible providers), else ``Retry-After`` as delay-seconds or
  an HTTP-date. Anything else (garbage, a negative or non-finite number) is None: the caller
  backs off as if nothing was asked.
- :func:`backoff` is the exponential backoff, tenacity's ``wait_exponential``: the n-th wait's
  ceiling is ``first_s·2^(n-1)``, at most ``max_s``; with jitter (:class:`wait_upper_half`) a
  wait is drawn from ``[ceiling/2, ceiling]`` so that many clients failing together do not
  retry in step. A loop that is no retry of one call (a watch that reconnects for ever, an
  infra retry across leases) counts its failures itself and asks :func:`pause_s`.
- :class:`wait_retry_after` is the tenacity wait that honours a ``Retry-After`` once: when the
  failure that is being retried carries one (an exception's ``retry_after_s``), that wait is
  the server's, cut to ``cap_s``; the next failure without one backs off again as usual.
- tenacity's own ``stop_*`` and ``retry_if_*`` bound and select retries; the wait is computed
  before the stop is asked (tenacity ≥ 9), so ``stop_before_delay`` never sleeps past a budget.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import RetryCallState, wait_exponential
from tenacity.wait import wait_base

__all__ = [
    "backoff",
    "honoured_wait",
    "parse_retry_after",
    "pause_s",
    "retry_after_of",
    "wait_retry_after",
    "wait_upper_half",
]


def _header(headers: Any, name: str) -> str | None:
    """``name``'s value in a header mapping, whatever the case of its keys (httpx, urllib3 and
    litellm each hand headers over in a different type)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    value = get(name)
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value).strip()


def _seconds(text: str, scale: float = 1.0) -> float | None:
    try:
        value = float(text) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds the server asked the client to wait before trying again, from its response
    headers (any mapping; names in any case): ``retry-after-ms``, else ``Retry-After`` as
    delay-seconds (``"120"``, also ``"1.5"``) or an HTTP-date (a date already past is 0).
    None when neither is present or readable; never raises. ``now`` (epoch seconds) is for
    tests of the date form."""
    if not headers:
        return None
    millis = _header(headers, "retry-after-ms")
    if millis:
        asked = _seconds(millis, 1 / 1000)
        if asked is not None:
            return asked
    value = _header(headers, "retry-after")
    if not value:
        return None
    asked = _seconds(value)
    if asked is not None or value[0].isdigit() or value[0] in "+-.":
        return asked  # a number, or something that is no date either
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if date.tzinfo is None:  # "-0000" or no zone: RFC 9110 dates are GMT
        return None
    return max(0.0, date.timestamp() - (time.time() if now is None else now))


def honoured_wait(backoff_s: float, asked_s: float | None, cap_s: float) -> float:
    """The pause before the next try: the server's ``asked_s`` cut to ``cap_s`` when it
    asked, else ``backoff_s``."""
    return backoff_s if asked_s is None else min(asked_s, cap_s)


class wait_upper_half(wait_base):  # noqa: N801 - named like tenacity's waits
    """A tenacity wait drawn at random from the upper half of ``wait``'s: ``[w/2, w]``."""

    def __init__(self, wait: wait_base) -> None:
        self.wait = wait

    def __call__(self, retry_state: RetryCallState) -> float:
        ceiling = self.wait(retry_state)
        return random.uniform(ceiling / 2, ceiling)


def backoff(first_s: float, max_s: float, *, jitter: bool = True) -> wait_base:
    """The exponential backoff (see the module doc) as a tenacity wait (``wait=backoff(...)``)."""
    exponential = wait_exponential(multiplier=first_s, max=max_s)
    return wait_upper_half(exponential) if jitter else exponential


def pause_s(wait: Callable[[RetryCallState], float], attempt: int) -> float:
    """The pause ``wait`` (a tenacity wait: :func:`backoff`) gives after failed try number
    ``attempt`` (1-based; less counts as 1), for a loop that counts its failures itself."""
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = max(1, attempt)
    return wait(state)


def retry_after_of(exc: BaseException | None) -> float | None:
    """The ``retry_after_s`` an error carries (ModelError, the Kubernetes ApiError, a webhook's
    answer); None when it has none."""
    asked = getattr(exc, "retry_after_s", None)
    return float(asked) if isinstance(asked, int | float) else None


class wait_retry_after(wait_base):  # noqa: N801 - named like tenacity's waits
    """A tenacity wait: the server's ``Retry-After`` (read by ``asked`` from the failure being
    retried, default :func:`retry_after_of`) cut to ``cap_s``, else ``backoff``."""

    def __init__(
        self,
        backoff: Callable[[RetryCallState], float],
        cap_s: float,
        asked: Callable[[BaseException | None], float | None] = retry_after_of,
    ) -> None:
        self.backoff = backoff
        self.cap_s = cap_s
        self.asked = asked

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        failure = outcome.exception() if outcome is not None and outcome.failed else None
        return honoured_wait(self.backoff(retry_state), self.asked(failure), self.cap_s)
