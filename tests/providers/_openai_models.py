"""Which OpenAI models reason, and which reasoning efforts and sampling parameters they take."""

from __future__ import annotations

import re

DOCS_REASONING = "https://platform.openai.com/docs/guides/reasoning"
DOCS_GPT_5 = "https://platform.openai.com/docs/guides/latest-model"

# DOCS_GPT_5 ("GPT-5.2 parameter compatibility"): gpt-5.1 and gpt-5.2 take temperature/top_p only
# with reasoning effort "none", their default; gpt-5, gpt-5.2-pro and the o-series never.
SAMPLING_WITH_EFFORT_NONE = ("gpt-5.1", "gpt-5.2")
# DOCS_REASONING / DOCS_GPT_5: the reasoning efforts each family accepts.
EFFORTS = {
    "gpt-5.2-pro": ("medium", "high", "xhigh"),
    "gpt-5.2": ("none", "low", "medium", "high", "xhigh"),
    "gpt-5.1": ("none", "low", "medium", "high"),
    "gpt-5": ("minimal", "low", "medium", "high"),
    "o": ("low", "medium", "high"),
}


def is_reasoning_model(model: str) -> bool:
    """Whether OpenAI serves ``model`` as a reasoning model (gpt-5 family but chat, o-series)."""
    model = model.rsplit("/", 1)[-1]
    return (model.startswith("gpt-5") and "chat" not in model) or re.match(r"^o[134](-|$)", model) is not None


def family(model: str) -> str:
    """The key of :data:`EFFORTS` that ``model`` belongs to (o-series by default)."""
    for name in EFFORTS:
        if model.startswith(name):
            return name
    return "o"


def default_effort(model: str) -> str:
    """The reasoning effort OpenAI applies when the request names none."""
    return "none" if model.startswith(SAMPLING_WITH_EFFORT_NONE) and "pro" not in model else "medium"
