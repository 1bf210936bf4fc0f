"""How a cost is written for people: ``$0.0123``, or ``unknown`` when a model spent tokens but
had no price (litellm has none for it and none was configured). Writing ``$0.0000`` then would
claim the trials were free; a run without tokens (the replay oracle) really costs nothing."""

from __future__ import annotations


def cost_known(usd: float, tokens: int) -> bool:
    """False when tokens were spent and nothing was priced."""
    return usd > 0 or tokens <= 0


def cost_text(usd: float, tokens: int) -> str:
    """``$N.NNNN``, or ``unknown`` for tokens without a price."""
    return f"${usd:.4f}" if cost_known(usd, tokens) else "unknown"


def tokens_text(total: int, reasoning: int = 0, cached: int = 0) -> str:
    """``N``, or ``N (R reasoning, C cached)`` when some of the tokens were reasoning or were read
    from the provider's prompt cache (billed at their own rates)."""
    parts = [f"{count} {label}" for count, label in ((reasoning, "reasoning"), (cached, "cached")) if count]
    return f"{total} ({', '.join(parts)})" if parts else str(total)
