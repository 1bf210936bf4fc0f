"""What every model call of a process shares: a per-provider concurrency window and a
cost ledger (DESIGN §9).

Each provider (the litellm prefix of a model string: ``openai``, ``anthropic``, …) gets a
window of concurrent calls, agent and judge calls alike. A call that met a 429 halves the
window (never below 1); each clean call widens it by one, up to the configured maximum
(AIMD). The ledger adds up the cost of every call and, when a ceiling is set, refuses new
calls once it is reached — so at most the calls already in flight pass it.

The window's size is process-wide; the waiting itself is per event loop, because asyncio
primitives belong to one loop (a process may run several loops one after another).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


def provider_of(model: str) -> str:
    """The provider part of a litellm model string (``openai/gpt-4o`` → ``openai``)."""
    return model.split("/", 1)[0] if "/" in model else model


@dataclass
class _Window:
    maximum: int
    limit: float


@dataclass
class _Waiters:
    in_flight: dict[str, int] = field(default_factory=dict)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class ProviderLimiter:
    """Concurrent model calls per provider, shrinking on rate limits and recovering."""

    def __init__(self, limits: dict[str, int] | None = None, *, default: int = 8) -> None:
        self._limits = dict(limits or {})
        self._default = default
        self._windows: dict[str, _Window] = {}
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiters] = (
            weakref.WeakKeyDictionary()
        )

    def configure(self, limits: dict[str, int] | None = None, *, default: int | None = None) -> None:
        """Set the maximum per provider (windows start again from the new maxima)."""
        self._limits = dict(limits or {})
        if default is not None:
            self._default = default
        self._windows.clear()

    def _window(self, provider: str) -> _Window:
        if provider not in self._windows:
            maximum = self._limits.get(provider, self._default)
            self._windows[provider] = _Window(maximum=maximum, limit=float(maximum))
        return self._windows[provider]

    def _waiters(self) -> _Waiters:
        loop = asyncio.get_running_loop()
        if loop not in self._loops:
            self._loops[loop] = _Waiters()
        return self._loops[loop]

    def limit(self, provider: str) -> int:
        return max(1, int(self._window(provider).limit))

    def in_flight(self, provider: str) -> int:
        """Calls of ``provider`` holding a slot in the running loop."""
        return self._waiters().in_flight.get(provider, 0)

    @asynccontextmanager
    async def slot(self, provider: str) -> AsyncIterator[None]:
        """Hold one of the provider's concurrent slots for the body."""
        waiters = self._waiters()
        async with waiters.changed:
            await waiters.changed.wait_for(lambda: waiters.in_flight.get(provider, 0) < self.limit(provider))
            waiters.in_flight[provider] = waiters.in_flight.get(provider, 0) + 1
        try:
            yield
        finally:
            async with waiters.changed:
                waiters.in_flight[provider] -= 1
                waiters.changed.notify_all()

    async def report(self, provider: str, *, rate_limited: bool) -> None:
        """Multiplicative decrease after a 429, additive increase after a clean call."""
        window = self._window(provider)
        if rate_limited:
            window.limit = max(1.0, window.limit / 2)
        else:
            window.limit = min(float(window.maximum), window.limit + 1)
        waiters = self._waiters()
        async with waiters.changed:
            waiters.changed.notify_all()


class CostLedger:
    """USD spent by model calls, per role (``agent``, ``judge``) and in total; thread-safe."""

    def __init__(self, ceiling_usd: float | None = None) -> None:
        self.ceiling_usd = ceiling_usd
        self._lock = threading.Lock()
        self._spent: dict[str, float] = {}
        self.calls = 0

    def record(self, role: str, cost_usd: float) -> None:
        with self._lock:
            self._spent[role] = self._spent.get(role, 0.0) + cost_usd
            self.calls += 1

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return sum(self._spent.values())

    def spent_by_role(self) -> dict[str, float]:
        with self._lock:
            return dict(self._spent)

    def exhausted(self) -> bool:
        return self.ceiling_usd is not None and self.spent_usd >= self.ceiling_usd


_LIMITER = ProviderLimiter()
_LEDGER = CostLedger()


def shared_limiter() -> ProviderLimiter:
    """The limiter every :func:`atoll.llm.complete` call of this process goes through."""
    return _LIMITER


def shared_ledger() -> CostLedger:
    """The ledger every :func:`atoll.llm.complete` call of this process records into."""
    return _LEDGER


def configure_limits(
    per_provider: dict[str, int] | None = None,
    *,
    default: int | None = None,
    cost_ceiling_usd: float | None = None,
) -> None:
    """Set this process's per-provider maxima and the ledger's ceiling (None = no ceiling)."""
    _LIMITER.configure(per_provider, default=default)
    _LEDGER.ceiling_usd = cost_ceiling_usd
