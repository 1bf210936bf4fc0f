"""The model table behind :mod:`atoll.llm.profiles`: how the models the APEX-Agents paper ran
take thinking levels, sampling parameters and structured output, by their providers'
documented rules (cited in docs/models.md). Models not matched here are profiled from
litellm's model information."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Thinking = Literal["off", "low", "medium", "high"]
THINKING_LEVELS: tuple[str, ...] = ("off", "low", "medium", "high")
# How a model takes a thinking level:
#   effort    - ``reasoning_effort`` (litellm maps it: OpenAI as is, Gemini 3 to thinkingLevel)
#   anthropic - ``thinking: {type: enabled, budget_tokens}`` (Anthropic extended thinking)
#   always    - the model always reasons and takes no level (Grok 4, Kimi K2 Thinking)
#   none      - the model does not reason
ThinkingStyle = Literal["effort", "anthropic", "always", "none"]
# When ``temperature``/``top_p`` may be sent:
#   free      - always
#   advised   - always, but the provider advises its default, so preferred values are not sent
#   when_off  - only while thinking is off (gpt-5.1/5.2 at effort none; Claude without thinking)
#   default   - never other than 1 (gpt-5, gpt-5-pro, o-series)
Sampling = Literal["free", "advised", "when_off", "default"]
StructuredOutput = Literal["json_schema", "json_object", "tool", "prompt"]

# Anthropic: budget_tokens >= 1024 and below max_tokens; the answer (or tool call) needs room
# beyond the budget. Source: docs.anthropic.com, "Building with extended thinking".
# max_tokens stays under 21,333: above it Anthropic's clients require streaming.
ANTHROPIC_BUDGETS: Mapping[str, int] = {"low": 2048, "medium": 6144, "high": 12288}
ANTHROPIC_ANSWER_ROOM = 8192


@dataclass(frozen=True)
class Family:
    pattern: str
    thinking: ThinkingStyle
    levels: Mapping[str, Any]
    sampling: Sampling
    structured: StructuredOutput
    why: str
    default_off: bool = False
    max_output_tokens: int | None = None
    refused: tuple[str, ...] = ()  # parameters the provider refuses for the model outright


EFFORT3 = {"low": "low", "medium": "medium", "high": "high"}
# Matched against the model's name without its provider route (``openai/``, ``openrouter/openai/``,
# ``us.anthropic.``), first match wins. Each rule is documented in docs/models.md.
FAMILIES: tuple[Family, ...] = (
    Family(
        r"gpt-5(\.\d+)?-pro",
        "effort",
        {"medium": "medium", "high": "high"},
        "default",
        "json_schema",
        "OpenAI: gpt-5 pro models take reasoning effort medium or high and only the default sampling",
    ),
    Family(
        r"gpt-5\.\d+(?!-chat)",
        "effort",
        {"off": "none", **EFFORT3},
        "when_off",
        "json_schema",
        "OpenAI: gpt-5.1 and later accept temperature and top_p only at reasoning effort none",
        default_off=True,
    ),
    Family(
        r"gpt-5(?!\.\d|-chat)",
        "effort",
        {"off": "minimal", **EFFORT3},
        "default",
        "json_schema",
        "OpenAI: gpt-5 is a reasoning model; temperature and top_p other than 1 are refused",
    ),
    Family(
        r"o[134](-mini|-pro)?(-\d{4}-\d\d-\d\d)?$",
        "effort",
        EFFORT3,
        "default",
        "json_schema",
        "OpenAI: o-series reasoning models refuse temperature and top_p other than 1",
    ),
    Family(
        r"claude-(3-7-sonnet|(opus|sonnet|haiku)-4)",
        "anthropic",
        {"off": None, **ANTHROPIC_BUDGETS},
        "when_off",
        "json_schema",
        "Anthropic: with extended thinking, temperature may only be 1 and top_p only 0.95 to 1",
    ),
    Family(
        r"gemini-3\.\d+-pro",
        "effort",
        EFFORT3,
        "advised",
        "json_schema",
        "Google: Gemini 3.1 Pro thinks at level low, medium or high; thinking cannot be turned off",
    ),
    Family(
        r"gemini-3-pro",
        "effort",
        {"low": "low", "high": "high"},
        "advised",
        "json_schema",
        "Google: Gemini 3 Pro thinks at level low or high; thinking cannot be turned off",
    ),
    Family(
        r"gemini-3(\.\d+)?-flash",
        "effort",
        {"off": "minimal", **EFFORT3},
        "advised",
        "json_schema",
        "Google: Gemini 3 Flash thinks at level minimal, low, medium or high",
    ),
    Family(
        r"grok-4(?!.*non-reasoning)",
        "always",
        {},
        "free",
        "json_schema",
        "xAI: Grok 4 always reasons; it refuses reasoning_effort, presence_penalty, frequency_penalty and stop",
        refused=("presence_penalty", "frequency_penalty", "stop"),
    ),
    Family(
        r"kimi-k2-thinking",
        "always",
        {},
        "free",
        "json_object",
        "Moonshot: Kimi K2 Thinking always reasons; it takes no reasoning effort",
    ),
    Family(
        r"gpt-oss",
        "effort",
        EFFORT3,
        "free",
        "json_object",
        "OpenAI: gpt-oss reasons at effort low, medium or high; it cannot be turned off",
    ),
)
