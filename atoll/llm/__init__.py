"""The model client shared by the agent runner and the judge.

Public API::

    from atoll.llm import Endpoint, RetryPolicy, complete, ModelError, ModelErrorKind
    done = await complete(Endpoint("openai/gpt-4o-mini"), messages, role="judge", timeout_s=60)

One ``complete()`` over litellm, one retry policy, one error classification, one
per-provider concurrency window and one cost ledger per process. See docs/agents_runner.md
("Model calls").
"""

from typing import TYPE_CHECKING

from atoll._lazy import lazy_attributes

if TYPE_CHECKING:
    from atoll.llm.client import Completion, Endpoint, complete, resolve_api_key, response_cost
    from atoll.llm.errors import ModelError, ModelErrorKind, classify, provider_message
    from atoll.llm.limits import (
        CostLedger,
        ProviderLimiter,
        configure_limits,
        provider_of,
        shared_ledger,
        shared_limiter,
    )
    from atoll.llm.retry import RetryBudget, RetryPolicy, retry_after_s
    from atoll.llm.usage import token_counts

# Exported lazily (PEP 562): importing a light submodule (atoll.llm.profiles, which experiment
# loading uses) must not import litellm through the client.
_HOMES = {
    "Completion": "client",
    "Endpoint": "client",
    "complete": "client",
    "resolve_api_key": "client",
    "response_cost": "client",
    "ModelError": "errors",
    "ModelErrorKind": "errors",
    "classify": "errors",
    "provider_message": "errors",
    "CostLedger": "limits",
    "ProviderLimiter": "limits",
    "configure_limits": "limits",
    "provider_of": "limits",
    "shared_ledger": "limits",
    "shared_limiter": "limits",
    "RetryBudget": "retry",
    "RetryPolicy": "retry",
    "retry_after_s": "retry",
    "token_counts": "usage",
}


__getattr__, __dir__ = lazy_attributes(
    "atoll.llm", {name: f"atoll.llm.{home}" for name, home in _HOMES.items()}, globals()
)


__all__ = [
    "Completion",
    "CostLedger",
    "Endpoint",
    "ModelError",
    "ModelErrorKind",
    "ProviderLimiter",
    "RetryBudget",
    "RetryPolicy",
    "classify",
    "complete",
    "configure_limits",
    "provider_message",
    "provider_of",
    "resolve_api_key",
    "response_cost",
    "retry_after_s",
    "shared_ledger",
    "shared_limiter",
    "token_counts",
]
