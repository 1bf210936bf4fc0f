"""What the provider tests share to drive litellm's real provider code against an emulator."""

from __future__ import annotations

from typing import Any

import litellm

from tests.providers._server import ProviderEmulator

WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
"""One tool, in the OpenAI form litellm takes."""


def complete(emu: ProviderEmulator, model: str, messages: list[Any], stream: bool, **params: Any) -> Any:
    """litellm's completion of ``messages`` with :data:`WEATHER_TOOLS` against ``emu``, without
    retries; a stream is rebuilt into one response."""
    response = litellm.completion(
        model=model,
        api_base=emu.api_base,
        api_key="test",
        messages=messages,
        tools=WEATHER_TOOLS,
        stream=stream,
        max_retries=0,
        **params,
    )
    if stream:
        response = litellm.stream_chunk_builder(list(response), messages=messages)
    return response


def rebuilt_without_provider_fields(call: Any) -> dict[str, Any]:
    """An assistant message rebuilt from one tool call as role + tool_calls only, as a caller that
    loses what the provider attached to the message (signatures, reasoning items) sends it."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call.id, "type": "function", "function": call.function.model_dump()}],
    }
