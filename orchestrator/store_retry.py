"""Retrying the trial store's operations through database faults.

A PostgreSQL restart, a failover, a proxy that drops connections or a terminated backend
shows up as a connection error in the middle of an operation. Every public operation of
the store is retried on such errors, with exponential backoff (:func:`atoll.retry.backoff`),
for a bounded time; then the error surfaces as ``AtollError("store_unavailable")``. Errors that retrying cannot fix
(constraint violations, bad SQL) surface at once.

Retrying is safe because every write is idempotent: leases carry a token chosen before the
first try, results and infra failures a write id recorded with their attempt, so a write
whose commit landed but whose reply was lost is recognised on the retry, never applied twice.

The first connection is different: a store that was never reached is more likely a wrong
URL, a closed port or a missing route than an outage, so opening it (``TrialStore(wait=True)``)
retries only for ``ATOLL_STORE_CONNECT_S`` (default 10) and then says which store and why,
as ``AtollError("store_unreachable")``. A store that answered once and then drops keeps the
long window.

Settings: ``ATOLL_STORE_RETRY_S`` (total time one operation may keep retrying, default
120), ``ATOLL_STORE_RETRY_MAX_BACKOFF_S`` (longest pause between tries, default 5) and
``ATOLL_STORE_CONNECT_S`` (how long the first connection may keep retrying, default 10).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field, ValidationError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from atoll.errors import AtollError, ErrorCode
from atoll.retry import backoff
from atoll.settings import AtollSettings

log = logging.getLogger("atoll.orchestrator.store")

F = TypeVar("F", bound=Callable[..., Any])


class StoreRetrySettings(AtollSettings):
    """``ATOLL_STORE_RETRY_S``, ``ATOLL_STORE_RETRY_MAX_BACKOFF_S``, ``ATOLL_STORE_CONNECT_S``."""

    store_retry_s: float = Field(120.0, description="total time one store operation may keep retrying")
    store_retry_max_backoff_s: float = Field(5.0, description="longest pause between two tries")
    store_connect_s: float = Field(
        10.0, description="how long the first connection to the store may keep retrying"
    )


@dataclass(frozen=True)
class StoreRetry:
    """How long a store operation keeps retrying database errors, and how it backs off."""

    total_s: float = 120.0
    first_backoff_s: float = 0.25
    max_backoff_s: float = 5.0
    connect_s: float = 10.0

    @classmethod
    def from_env(cls) -> StoreRetry:
        """The policy the ``ATOLL_STORE_*`` settings give (:class:`StoreRetrySettings`). Raises
        ``AtollError("bad_settings")`` naming the variable that is not a number."""
        try:
            settings = StoreRetrySettings()
        except ValidationError as exc:
            problems = "; ".join(
                f"ATOLL_{'.'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
                for error in exc.errors()
            )
            raise AtollError(ErrorCode.bad_settings, problems) from None
        return cls(
            total_s=settings.store_retry_s,
            max_backoff_s=settings.store_retry_max_backoff_s,
            connect_s=settings.store_connect_s,
        )


def is_transient(exc: BaseException) -> bool:
    """A database error that a new connection may not have: lost or refused connections,
    terminated backends, SQLite's busy lock."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning(
        "trial store: %s failed (%s); retrying (try %d)",
        state.fn.__name__ if state.fn else "operation",
        str(exc).splitlines()[0] if exc else "?",
        state.attempt_number,
    )


def retried(method: F) -> F:
    """Run a store method under the store's ``retry`` policy (see the module doc)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        policy: StoreRetry = self.retry
        try:
            return _retrying(policy, policy.total_s)(method, self, *args, **kwargs)
        except (OperationalError, InterfaceError, DBAPIError) as exc:
            if not is_transient(exc):
                raise
            raise AtollError(
                ErrorCode.store_unavailable,
                f"trial store {self.display_url}: {method.__name__} failed for {policy.total_s:g} s: {_reason(exc)}",
            ) from None

    return wrapper  # type: ignore[return-value]


def first_connection(method: F) -> F:
    """Run the method that first connects to the store, retrying for the short
    ``connect_s`` window only; then AtollError("store_unreachable") naming the store."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        policy: StoreRetry = self.retry
        try:
            return _retrying(policy, policy.connect_s)(method, self, *args, **kwargs)
        except (OperationalError, InterfaceError, DBAPIError) as exc:
            if not is_transient(exc):
                raise
            raise AtollError(
                ErrorCode.store_unreachable,
                f"trial store {self.display_url}: cannot connect (tried for {policy.connect_s:g} s): {_reason(exc)}",
            ) from None

    return wrapper  # type: ignore[return-value]


def _retrying(policy: StoreRetry, total_s: float) -> Retrying:
    exponential = backoff(policy.first_backoff_s, policy.max_backoff_s, jitter=False)

    def wait(state: RetryCallState) -> float:
        # The last try comes at the window's end, not one backoff past it.
        return max(0.0, min(exponential(state), total_s - (state.seconds_since_start or 0.0)))

    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_delay(total_s),
        wait=wait,
        before_sleep=_log_retry,
        reraise=True,
    )


def _reason(exc: BaseException) -> str:
    lines = str(getattr(exc, "orig", exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
