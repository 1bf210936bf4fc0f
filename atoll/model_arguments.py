"""Which model-call arguments a caller may set: plain generation parameters, nothing that
moves a call or its key.

litellm reads far more than sampling parameters from ``acompletion``'s keyword arguments:
``api_base``/``base_url``, ``api_key`` and every provider's credential fields
(``aws_*``, ``vertex_*``, ``azure_ad_token``…), ``fallbacks`` and
``context_window_fallbacks`` (each entry may name its own endpoint, and litellm sends the
key to it when the first endpoint fails), ``model_list`` and router settings,
``custom_llm_provider``, ``extra_headers``/``headers``, ``client`` objects, proxies,
callbacks and ``mock_response``. An experiment's or a request's ``extra_args`` therefore go
through an allow-list (:data:`GENERATION_ARGUMENTS`) rather than a deny-list: an argument
litellm learns tomorrow is refused until it is added here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# Plain generation parameters: they change what the model is asked, never where the call
# goes or what credentials it carries.
GENERATION_ARGUMENTS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "reasoning",
        "thinking",
        "include_reasoning",
        "thought_signature_in_tool_call_id",  # litellm's Gemini signature mode (providers.md)
        "include",  # Responses API: e.g. reasoning.encrypted_content
        "previous_response_id",
        "truncation",
        "max_output_tokens",
        "api_version",  # Azure's API version (a query parameter; Azure is called only on listed endpoints)
        "verbosity",
        "drop_params",
        "user",
        "safety_settings",
        "service_tier",
        "store",
        "extra_body",  # merged into the request body only; checked for key-like names below
    }
)

# A field whose name ends in one of these words holds a credential (``api_key``,
# ``aws_secret_access_key``, ``auth_token``, ``azure_ad_token``, ``client_secret``…);
# ``max_tokens`` and ``token_budget`` do not (plural / not the last word).
_KEY_WORDS = frozenset(
    {
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "token",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "bearer",
    }
)
# The one key-like name that is a reference, not a key.
SECRET_REFERENCE = "api_key_secret"
_SEGMENTS = re.compile(r"[^a-z0-9]+")

INLINE_KEY_HELP = (
    "a key may not be written inline; name a secret the operator provisioned for the endpoint "
    f"with {SECRET_REFERENCE}: NAME (docs/security.md, 'Provider keys and endpoints')"
)


def is_key_like(name: str) -> bool:
    """True when a field called ``name`` would hold a credential."""
    if name == SECRET_REFERENCE:
        return False
    words = [word for word in _SEGMENTS.split(name.lower()) if word]
    return bool(words) and words[-1] in _KEY_WORDS


def key_like_fields(value: Any, path: str) -> Iterator[str]:
    """The dotted paths (below ``path``) of every key-like field name in nested mappings and lists."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            here = f"{path}.{name}"
            if is_key_like(str(name)):
                yield here
            yield from key_like_fields(item, here)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from key_like_fields(item, f"{path}[{index}]")


def argument_problem(arguments: Mapping[str, Any], path: str) -> str | None:
    """None when every argument may be passed to the model; else one line naming the first
    field that may not (``path`` is how the caller names the mapping, e.g. ``judge.extra_args``)."""
    for name in sorted(arguments, key=str):
        field = f"{path}.{name}"
        if is_key_like(str(name)):
            return f"{field}: {INLINE_KEY_HELP}"
        if name not in GENERATION_ARGUMENTS:
            return (
                f"{field}: not a generation parameter; extra_args may only set "
                f"{', '.join(sorted(GENERATION_ARGUMENTS))} (endpoints, keys, fallbacks, routing, "
                "proxies, headers, clients, callbacks and mock responses could send a provider key "
                "elsewhere)"
            )
    for field in key_like_fields(arguments.get("extra_body"), f"{path}.extra_body"):
        return f"{field}: {INLINE_KEY_HELP}"
    return None


def check_arguments(arguments: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """``arguments`` unchanged when :func:`argument_problem` finds nothing; else ValueError
    with its line (pydantic validators turn it into a field error)."""
    problem = argument_problem(arguments, path)
    if problem:
        raise ValueError(problem)
    return arguments


def check_no_inline_keys(value: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """``value`` unchanged when no field below it is key-like; else ValueError naming it."""
    for field in key_like_fields(value, path):
        raise ValueError(f"{field}: {INLINE_KEY_HELP}")
    return value


__all__ = [
    "GENERATION_ARGUMENTS",
    "INLINE_KEY_HELP",
    "SECRET_REFERENCE",
    "argument_problem",
    "check_arguments",
    "check_no_inline_keys",
    "is_key_like",
    "key_like_fields",
]
