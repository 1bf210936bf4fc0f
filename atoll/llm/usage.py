"""Token counts of a model response as the provider bills them (the agent's usage; the judge's)."""

from __future__ import annotations

from typing import Any


def token_counts(response: Any) -> dict[str, int]:
    """The billed token counts of a litellm response, as litellm maps each provider's usage.

    ``prompt_tokens`` includes cached and cache-write tokens and ``completion_tokens`` includes
    reasoning tokens, for every provider: OpenAI's ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens``; Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` (litellm adds both to the prompt, and estimates reasoning from
    the thinking text); Gemini's ``cachedContentTokenCount`` and ``thoughtsTokenCount``."""
    raw = getattr(response, "usage", None)
    details = getattr(raw, "completion_tokens_details", None)
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    cached = _count(prompt_details, "cached_tokens") or _count(raw, "cache_read_input_tokens")
    written = (
        _count(prompt_details, "cache_creation_tokens")
        or _count(prompt_details, "cache_write_tokens")
        or _count(raw, "cache_creation_input_tokens")
    )
    return {
        "prompt_tokens": _count(raw, "prompt_tokens"),
        "completion_tokens": _count(raw, "completion_tokens"),
        "reasoning_tokens": _count(details, "reasoning_tokens"),
        "cached_tokens": cached,
        "cache_write_tokens": written,
    }


def _count(holder: Any, name: str) -> int:
    value = holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)
    return int(value or 0)
