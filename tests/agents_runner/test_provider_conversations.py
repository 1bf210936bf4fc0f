"""The agents against the provider emulators (tests/providers/), thinking on: each provider gets
its conversation state back as it requires, through every path that rewrites the context
(summarisation, tool-result truncation, toolbelt changes, a run seeded with a saved trajectory).

The emulators verify what they get (signed thinking blocks, thought signatures, reasoning items)
and record every refusal in ``emu.rejections``."""

from __future__ import annotations

import json

import pytest

from agents_runner import run_agent
from agents_runner.conversation import PROVIDER_FIELDS
from atoll.trajectory import RunStatus, Trajectory

from .conftest import assert_every_call_answered_once, call

CLAUDE = "anthropic/claude-opus-4-5-20251101"
GEMINI = "gemini/gemini-3-pro-preview"
GPT_PRO = "openai/gpt-5.2-pro"  # litellm sends it to the Responses API
# stateless Responses calls: the reasoning items come back with their encrypted content
STATELESS = {"extra_args": {"store": False, "include": ["reasoning.encrypted_content"]}}
# litellm's two places for a Gemini thought signature: inside the tool-call id (its default), or
# only in the tool call's provider_specific_fields
SIGNATURE_MODES = {"in_id": {}, "in_fields": {"extra_args": {"thought_signature_in_tool_call_id": False}}}
TASK = "Read /notes/todo.txt and report what it says."


def _toolbelt_script() -> list[dict]:
    return [
        {
            "thinking": "I need the file tool.",
            "tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_text_file")],
        },
        {
            "thinking": "Plan first.",
            "redacted_thinking": True,  # Anthropic only: an opaque block after the thinking one
            "tool_calls": [
                call("todo_write", todos=[{"id": "1", "content": "read", "status": "in_progress"}])
            ],
        },
        {
            "thinking": "Now read it.",
            "content": "Reading.",
            "tool_calls": [call("filesystem_read_text_file", file_path="/notes/todo.txt")],
        },
        {
            "thinking": "Done; close the todo.",
            "tool_calls": [call("todo_write", todos=[{"id": "1", "status": "completed"}], merge=True)],
        },
        {"thinking": "Answer.", "tool_calls": [call("final_answer", answer="call the bank")]},
    ]


def _loop_script() -> list[dict]:
    """The loop agent's run: list, read, answer, thinking before each."""
    return [
        {"thinking": "List first.", "tool_calls": [call("filesystem_list_files", path="/")]},
        {
            "thinking": "Then read.",
            "tool_calls": [call("filesystem_read_text_file", file_path="/notes/todo.txt")],
        },
        {"thinking": "Answer.", "content": "It says: call the bank."},
    ]


async def _run(emu, gateway, *, agent="react_toolbelt", config=None, model=CLAUDE, **kwargs) -> Trajectory:
    return await run_agent(
        model=model,
        api_base=emu.api_base,
        api_key="test",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        agent=agent,
        config={"reasoning_effort": "high", **(config or {})},
        **({"prompt": TASK} if "initial_messages" not in kwargs else {}),
        **kwargs,
    )


def _thinking_sent(emu) -> list[list[dict]]:
    """The thinking blocks of each assistant turn in the last request, as the emulator got them."""
    turns = []
    for message in emu.requests[-1]["messages"]:
        if message["role"] == "assistant" and isinstance(message["content"], list):
            turns.append([b for b in message["content"] if b["type"] in ("thinking", "redacted_thinking")])
    return turns


@pytest.mark.parametrize("stream", [False, True])
async def test_claude_with_thinking_completes_a_toolbelt_task(anthropic, gateway, stream):
    anthropic.reset()
    anthropic.load(_toolbelt_script())
    trajectory = await _run(anthropic, gateway, config={"stream": stream})
    assert anthropic.rejections == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.final_answer == "call the bank"
    assert len(anthropic.requests) == 5
    # every earlier turn went back with its own signed thinking block, first, unchanged
    sent = _thinking_sent(anthropic)
    assert [[b["thinking"] for b in blocks[:1]] for blocks in sent] == [
        ["I need the file tool."],
        ["Plan first."],
        ["Now read it."],
        ["Done; close the todo."],
    ]
    assert all(
        anthropic.verify("thinking", b["thinking"], b["signature"]) for blocks in sent for b in blocks[:1]
    )
    assert [b["type"] for b in sent[1]] == ["thinking", "redacted_thinking"]  # in order, data unchanged
    recorded = [m for m in trajectory.messages if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in recorded][:2] == ["I need the file tool.", "Plan first."]
    assert all(m[PROVIDER_FIELDS]["thinking_blocks"][0]["signature"] for m in recorded)
    assert_every_call_answered_once(trajectory)


async def test_the_loop_agent_with_thinking_completes(anthropic, gateway):
    anthropic.reset()
    anthropic.load(_loop_script())
    trajectory = await _run(anthropic, gateway, agent="loop")
    assert anthropic.rejections == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert [[b["thinking"] for b in blocks] for blocks in _thinking_sent(anthropic)] == [
        ["List first."],
        ["Then read."],
    ]


def _assistant_turns_sent(emu, model: str) -> list[object]:
    """The assistant turns of the last request, in the provider's own form."""
    body = emu.requests[-1]
    if model == CLAUDE:
        return [m for m in body["messages"] if m["role"] == "assistant"]
    if model == GEMINI:
        return [c for c in body["contents"] if c["role"] == "model"]
    return [item for item in body["input"] if item.get("type") == "reasoning"]


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
async def test_truncated_tool_results_and_compaction_keep_the_provider_state(provider, request, gateway):
    """A long tool result is cut and the context is compacted mid-loop; the turns that stay go
    back unchanged (the emulators verify each signature and reasoning item), the compacted ones
    leave whole."""
    emu = request.getfixturevalue(provider)
    model, extra = {
        "anthropic": (CLAUDE, {}),
        "gemini": (GEMINI, SIGNATURE_MODES["in_fields"]),
        "openai": (GPT_PRO, STATELESS),
    }[provider]
    turns = iter(
        [
            {
                "thinking": "Add the tool.",
                "tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_big_file")],
            },
            *[
                {
                    "thinking": f"Read it again ({n}).",
                    "content": "x " * 200,
                    "tool_calls": [call("filesystem_read_big_file")],
                }
                for n in range(6)
            ],
            {"thinking": "Answer.", "tool_calls": [call("final_answer", answer="5000 lines")]},
        ]
    )

    def script(body):
        if "compress the working history" in json.dumps(body):
            return {"content": "I read the big file several times."}
        return next(turns)

    emu.reset()
    emu.load(script)
    trajectory = await _run(
        emu,
        gateway,
        model=model,
        config={"context_window": 9000, "keep_last_messages": 4, "tool_result_max_chars": 3000, **extra},
    )
    assert emu.rejections == []
    assert getattr(emu, "placeholder_signatures", []) == [] and getattr(emu, "dropped_reasoning", []) == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.compactions >= 1
    assert any(c.truncated for c in trajectory.tool_calls)
    kept = _assistant_turns_sent(emu, model)
    assert 0 < len(kept) < 7  # some turns were compacted away, with their provider state
    if model == CLAUDE:
        assert all(m["content"][0]["type"] == "thinking" for m in kept)
    assert_every_call_answered_once(trajectory)


async def test_a_run_seeded_with_a_saved_trajectory_continues_the_signed_tool_loop(anthropic, gateway):
    """A run stopped mid-loop (max_steps) is saved as JSON; a new run seeded with its messages
    sends the last assistant turn back with its signed thinking block."""
    anthropic.reset()
    anthropic.load(_toolbelt_script()[:2])
    first = await _run(anthropic, gateway, config={"max_steps": 2})
    assert first.status == RunStatus.max_steps and anthropic.rejections == []
    saved = json.loads(first.model_dump_json())
    seed = [m for m in saved["messages"] if m["role"] != "system"]

    anthropic.reset()
    anthropic.load(_toolbelt_script()[2:])
    second = await _run(anthropic, gateway, initial_messages=seed)
    assert anthropic.rejections == []
    assert second.status == RunStatus.completed, second.error
    first_request = anthropic.requests[0]["messages"]
    blocks = [m["content"][0] for m in first_request if m["role"] == "assistant"]
    assert [b["thinking"] for b in blocks] == ["I need the file tool.", "Plan first."]


def _signatures_sent(emu) -> list[str]:
    """The thought signatures on the function-call parts of the last request."""
    return [
        part["thoughtSignature"]
        for content in emu.requests[-1]["contents"]
        for part in content["parts"]
        if "thoughtSignature" in part and ("function_call" in part or "functionCall" in part)
    ]


@pytest.mark.parametrize("mode", list(SIGNATURE_MODES))
@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_3_gets_its_thought_signatures_back(gemini, gateway, mode, stream):
    gemini.reset()
    gemini.load(_toolbelt_script())
    config = {"stream": stream, **SIGNATURE_MODES[mode]}
    trajectory = await _run(gemini, gateway, model=GEMINI, config=config)
    assert gemini.rejections == []
    assert gemini.placeholder_signatures == []  # no skip-validation placeholder stood in for one
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert len(_signatures_sent(gemini)) == 4  # one per earlier function-call turn, all real
    ids = [c["id"] for m in trajectory.messages for c in m.get("tool_calls") or []]
    assert all(("__thought__" in call_id) == (mode == "in_id") for call_id in ids)
    assert_every_call_answered_once(trajectory)


async def test_the_loop_agent_on_gemini_3_with_signatures_outside_the_id(gemini, gateway):
    gemini.reset()
    gemini.load(_loop_script())
    trajectory = await _run(gemini, gateway, agent="loop", model=GEMINI, config=SIGNATURE_MODES["in_fields"])
    assert gemini.rejections == [] and gemini.placeholder_signatures == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert len(_signatures_sent(gemini)) == 2


async def test_a_gemini_run_seeded_with_a_saved_trajectory_sends_the_signatures_back(gemini, gateway):
    """Signatures outside the id live only in provider fields: they survive the JSON round trip."""
    gemini.reset()
    gemini.load(_toolbelt_script()[:2])
    first = await _run(gemini, gateway, model=GEMINI, config={"max_steps": 2, **SIGNATURE_MODES["in_fields"]})
    assert first.status == RunStatus.max_steps and gemini.rejections == []
    seed = [m for m in json.loads(first.model_dump_json())["messages"] if m["role"] != "system"]
    recorded = [m for m in seed if m["role"] == "assistant"]
    assert all(
        m[PROVIDER_FIELDS]["tool_calls"][0]["provider_specific_fields"]["thought_signature"] for m in recorded
    )

    gemini.reset()
    gemini.load(_toolbelt_script()[2:])
    second = await _run(
        gemini, gateway, model=GEMINI, config=SIGNATURE_MODES["in_fields"], initial_messages=seed
    )
    assert gemini.rejections == [] and gemini.placeholder_signatures == []
    assert second.status == RunStatus.completed, second.error


def _reasoning_items_sent(emu) -> list[dict]:
    return [item for item in emu.requests[-1]["input"] if item.get("type") == "reasoning"]


@pytest.mark.parametrize("stateless", [False, True])
@pytest.mark.parametrize("stream", [False, True])
async def test_responses_api_reasoning_items_go_back_with_their_calls(openai, gateway, stream, stateless):
    openai.reset()
    openai.load(_toolbelt_script())
    config = {"stream": stream, **(STATELESS if stateless else {})}
    trajectory = await _run(openai, gateway, model=GPT_PRO, config=config)
    assert openai.rejections == []
    assert openai.dropped_reasoning == []  # no turn started cold
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert all(path.endswith("/responses") for path in openai.request_paths)
    items = _reasoning_items_sent(openai)
    assert len(items) == 4  # one per earlier turn, before its function call
    assert all(item["id"].startswith("rs_") for item in items)
    if stateless:
        assert all(item.get("encrypted_content") for item in items)
    recorded = [m for m in trajectory.messages if m["role"] == "assistant"]
    assert all(m[PROVIDER_FIELDS]["reasoning_items"][0]["id"].startswith("rs_") for m in recorded)
    assert_every_call_answered_once(trajectory)


async def test_the_loop_agent_on_the_responses_api(openai, gateway):
    openai.reset()
    openai.load(_loop_script())
    trajectory = await _run(openai, gateway, agent="loop", model=GPT_PRO, config=STATELESS)
    assert openai.rejections == [] and openai.dropped_reasoning == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert len(_reasoning_items_sent(openai)) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_gpt_5_on_chat_completions_gets_back_only_what_openai_accepts(openai, gateway, stream):
    """Chat Completions returns no reasoning to give back: the turns go back in OpenAI's own
    form, with nothing litellm-only (provider fields, thinking blocks) a strict server refuses."""
    openai.reset()
    openai.load(_toolbelt_script())
    trajectory = await _run(openai, gateway, model="openai/gpt-5", config={"stream": stream})
    assert openai.rejections == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert all(path.endswith("/chat/completions") for path in openai.request_paths)
    sent = [m for m in openai.requests[-1]["messages"] if m["role"] == "assistant"]
    assert len(sent) == 4 and {key for m in sent for key in m} <= {"role", "content", "tool_calls"}
    assert all(set(c) == {"id", "type", "function"} for m in sent for c in m["tool_calls"])


# thinking off, as each model spells it: Claude without a thinking block, Gemini 3 Flash at level
# minimal (Gemini 3 Pro and gpt-5.2-pro cannot turn it off: refused, tests/atoll/test_model_profiles.py),
# gpt-5.2 at reasoning effort none
OFF = {
    CLAUDE: ("anthropic", lambda body: "thinking" not in body),
    "gemini/gemini-3-flash-preview": (
        "gemini",
        lambda body: body["generationConfig"]["thinkingConfig"]["thinkingLevel"].lower() == "minimal",
    ),
    "openai/gpt-5.2": ("openai", lambda body: body.get("reasoning_effort") == "none"),
}


@pytest.mark.parametrize("model", list(OFF))
@pytest.mark.parametrize("agent", ["react_toolbelt", "loop"])
async def test_thinking_off_completes_against_each_provider(model, agent, request, gateway):
    """``thinking: off`` goes out as each provider spells it, and the tool loop completes with
    nothing refused (a Gemini 3 model still signs its calls: the signatures go back)."""
    fixture, sent_off = OFF[model]
    emu = request.getfixturevalue(fixture)
    script = (
        [
            {"tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_text_file")]},
            {"tool_calls": [call("filesystem_read_text_file", file_path="/notes/todo.txt")]},
            {"tool_calls": [call("final_answer", answer="call the bank")]},
        ]
        if agent == "react_toolbelt"
        else [
            {"tool_calls": [call("filesystem_read_text_file", file_path="/notes/todo.txt")]},
            {"content": "It says: call the bank."},
        ]
    )
    emu.reset()
    emu.load(script)
    config = {"reasoning_effort": None, "thinking": "off"}
    trajectory = await _run(emu, gateway, model=model, agent=agent, config=config)
    assert emu.rejections == []
    assert getattr(emu, "placeholder_signatures", []) == [] and getattr(emu, "dropped_reasoning", []) == []
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert all(sent_off(body) for body in emu.requests), emu.requests[0]
    assert_every_call_answered_once(trajectory)
