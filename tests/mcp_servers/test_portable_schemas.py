"""Every tool our servers publish passes the strictest documented rules of OpenAI, Anthropic and
Google (atoll/tool_schemas.py cites each rule): as published over MCP, in both modes, named as
the gateway names them; as the agent hands them to litellm; and as litellm sends them to each
provider (litellm's real provider code against the emulators of tests/providers)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents_runner.gateway import ToolSpec
from atoll.tool_schemas import (
    MAX_TOOLS,
    anthropic_tools_problems,
    gemini_tools_problems,
    openai_tools_problems,
    responses_tools_problems,
    tool_problems,
)
from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES, create_server

SERVERS = (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES)
MODES = ("individual", "consolidated")


def _published(root: Path, mode: str) -> list[ToolSpec]:
    """Every tool of every server in ``mode``, named ``{server}_{tool}`` as the gateway does."""

    async def listing() -> list[ToolSpec]:
        specs = []
        for server in SERVERS:
            built = create_server(server, fs_root=root, apps_data_root=root, mode=mode)
            for tool in await built.list_tools():
                spec = ToolSpec(f"{server}_{tool.name}", tool.description or "", tool.parameters)
                specs.append(spec)
        return specs

    return asyncio.run(listing())


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[ToolSpec]]:
    root = tmp_path_factory.mktemp("world")
    return {mode: _published(root, mode) for mode in MODES}


def test_every_published_tool_passes_every_rule(published):
    every = published["individual"] + published["consolidated"]
    assert {spec.name.split("_")[0] for spec in every} >= {"mail", "chat", "calendar", "pdfs", "market"}
    assert sum(spec.name.endswith("_schema") for spec in published["consolidated"]) == len(SERVERS)
    problems = [
        str(p) for spec in every for p in tool_problems(spec.name, spec.description, spec.input_schema)
    ]
    assert problems == []


@pytest.mark.parametrize("mode", MODES)
def test_what_the_agent_hands_to_litellm_passes_every_rule(published, mode):
    tools = [spec.as_openai_tool() for spec in published[mode]]
    assert len(tools) <= MAX_TOOLS  # the loop agent sends them all in one request
    assert [str(p) for p in openai_tools_problems(tools)] == []
    no_arguments = [t["function"]["name"] for t in tools if "parameters" not in t["function"]]
    assert no_arguments == (
        ["market_data_list_rate_series", "market_data_list_coverage"] if mode == "individual" else []
    )


# --- what litellm sends to each provider -------------------------------------------------------
# litellm's real provider code reaches the emulators of tests/providers (each enforcing its
# provider's documented request rules); the bodies they received are checked against ours too.


@pytest.fixture(scope="module")
def emulators() -> Iterator[dict[str, Any]]:
    from tests.providers.anthropic import AnthropicEmulator
    from tests.providers.gemini import GeminiEmulator
    from tests.providers.openai import OpenAIEmulator

    with AnthropicEmulator([]) as anthropic, GeminiEmulator([]) as gemini, OpenAIEmulator([]) as openai:
        yield {"anthropic": anthropic, "gemini": gemini, "openai": openai}


def _sent(emulator: Any, model: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The body litellm sent ``emulator`` for one turn offering ``tools`` (the turn must pass)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    emulator.reset()
    emulator.load([{"content": "Done."}])
    litellm.completion(
        model=model,
        api_base=emulator.api_base,
        api_key="test-key",
        messages=[{"role": "user", "content": "Find the Q3 report."}],
        tools=tools,
        num_retries=0,
        timeout=30,
    )
    assert emulator.rejections == []
    (body,) = emulator.requests
    return body


@pytest.mark.parametrize("mode", MODES)
def test_what_litellm_sends_each_provider_passes_its_rules(published, emulators, mode):
    tools = [spec.as_openai_tool() for spec in published[mode]]
    # OpenAI Chat Completions: the tools as given.
    sent = _sent(emulators["openai"], "openai/gpt-5.2", tools)
    assert len(sent["tools"]) == len(tools)
    assert [str(p) for p in openai_tools_problems(sent["tools"])] == []
    # OpenAI Responses API (how litellm reaches gpt-5.2-pro): {type, name, description, parameters}.
    sent = _sent(emulators["openai"], "openai/gpt-5.2-pro", tools)
    assert len(sent["tools"]) == len(tools)
    assert [str(p) for p in responses_tools_problems(sent["tools"])] == []
    # Anthropic Messages: input_schema.
    sent = _sent(emulators["anthropic"], "anthropic/claude-opus-4-5-20251101", tools)
    assert len(sent["tools"]) == len(tools)
    assert [str(p) for p in anthropic_tools_problems(sent["tools"])] == []
    # Gemini generateContent: function_declarations in Gemini's Schema form.
    sent = _sent(emulators["gemini"], "gemini/gemini-3-flash-preview", tools)
    declarations = [d for tool in sent["tools"] for d in tool["function_declarations"]]
    assert len(declarations) == len(tools)
    assert [str(p) for p in gemini_tools_problems(sent["tools"])] == []


def test_a_consolidated_description_cut_to_fit_still_names_every_action(published):
    from mcp_servers import get_definition

    descriptions = {spec.name: spec.description for spec in published["consolidated"]}
    for server in SERVERS:
        definition = get_definition(server)
        text = descriptions[f"{server}_{definition.consolidated_name}"]
        missing = [tool.action for tool in definition.tools if tool.action not in text]
        assert missing == [], f"{server}: {missing}"
        if len(definition.tools) > 8:  # too long in full: the full help is pointed at
            assert f"{definition.consolidated_name}(action='help')" in text
