"""Per-provider concurrency that backs off on rate limits (AIMD) and recovers.

Each provider (the litellm prefix of a model string: ``openai``, ``anthropic``, …) gets a
window of concurrent agent runs. A run that met a 429 halves the window (never below 1);
each clean run widens it by one, up to the configured maximum.
"""

from __future__ import annotations

import asyncio
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
    in_flight: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class ProviderLimiter:
    def __init__(self, limits: dict[str, int] | None = None, *, default: int = 8) -> None:
        self._limits = dict(limits or {})
        self._default = default
        self._windows: dict[str, _Window] = {}

    def _window(self, provider: str) -> _Window:
        if provider not in self._windows:
            maximum = self._limits.get(provider, self._default)
            self._windows[provider] = _Window(maximum=maximum, limit=float(maximum))
        return self._windows[provider]

    def limit(self, provider: str) -> int:
        return max(1, int(self._window(provider).limit))

    @asynccontextmanager
    async def slot(self, provider: str) -> AsyncIterator[None]:
        """Hold one of the provider's concurrent slots for the body."""
        window = self._window(provider)
        async with window.changed:
            await window.changed.wait_for(lambda: window.in_flight < max(1, int(window.limit)))
            window.in_flight += 1
        try:
            yield
        finally:
            async with window.changed:
                window.in_flight -= 1
                window.changed.notify_all()

    async def report(self, provider: str, *, rate_limited: bool) -> None:
        """Multiplicative decrease after a 429, additive increase after a clean run."""
        window = self._window(provider)
        async with window.changed:
            if rate_limited:
                window.limit = max(1.0, window.limit / 2)
            else:
                window.limit = min(float(window.maximum), window.limit + 1)
            window.changed.notify_all()
