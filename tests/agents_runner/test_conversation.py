"""Conversation state: the assistant turn goes back to the model as litellm returned it, and the
trajectory records its OpenAI chat form plus the provider state (agents_runner/conversation.py).

The provider emulators (tests/providers/) check the same end to end per provider; these tests hold
the mechanism itself, through litellm's real OpenAI-compatible path and on litellm's own messages."""

from __future__ import annotations

import json

import litellm
import pytest

from agents_runner import run_agent
from agents_runner.conversation import PROVIDER_FIELDS, assistant_turn, provider_message, restore
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus, Trajectory

from .conftest import assert_every_call_answered_once, call

SIGNED_TURN = litellm.Message(
    content="Let me look.",
    tool_calls=[
        {
            "id": "toolu_01",
            "type": "function",
            "function": {"name": "filesystem_list_files", "arguments": "{}"},
        }
    ],
    reasoning_content="I should list the files.",
    thinking_blocks=[
        {"type": "thinking", "thinking": "I should list the files.", "signature": "SIG-1"},
        {"type": "redacted_thinking", "data": "REDACTED-2"},
    ],
    provider_specific_fields={"citations": [{"type": "char_location", "cited_text": "x"}]},
)


async def _run(llm: ScriptedLLM, gateway, **kwargs):
    return await run_agent(
        model="openai/kimi-k2-thinking",
        api_base=llm.api_base,
        api_key="x",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt="List the files, then report how many there are.",
        **kwargs,
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_content_goes_back_to_an_openai_compatible_reasoning_server(gateway, stream):
    """Kimi K2 Thinking and gpt-oss servers expect each tool-call turn's reasoning back."""
    script = [
        {
            "reasoning_content": "First list the files.",
            "tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_list_files")],
        },
        {"reasoning_content": "Now call it.", "tool_calls": [call("filesystem_list_files", path="/")]},
        {"reasoning_content": "Two files.", "tool_calls": [call("final_answer", answer="2 files")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"stream": stream})
    assert trajectory.status == RunStatus.completed, trajectory.error
    sent = [m for m in llm.requests[2]["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in sent] == ["First list the files.", "Now call it."]
    recorded = [m for m in trajectory.messages if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in recorded] == [
        "First list the files.",
        "Now call it.",
        "Two files.",
    ]
    assert_every_call_answered_once(trajectory)


def test_a_turn_is_sent_back_whole_and_recorded_in_openai_form():
    turn = assistant_turn(SIGNED_TURN, set())
    # sent back: every thinking block, in order, unchanged, and the provider's fields
    assert turn.message["thinking_blocks"] == [
        {"type": "thinking", "thinking": "I should list the files.", "signature": "SIG-1"},
        {"type": "redacted_thinking", "data": "REDACTED-2"},
    ]
    assert turn.message["provider_specific_fields"] == SIGNED_TURN.provider_specific_fields
    assert turn.message["reasoning_content"] == "I should list the files."
    # recorded: OpenAI chat form, the reasoning text, the provider state under one key
    assert set(turn.record) == {"role", "content", "tool_calls", "reasoning_content", PROVIDER_FIELDS}
    assert turn.record["tool_calls"] == [
        {
            "id": "toolu_01",
            "type": "function",
            "function": {"name": "filesystem_list_files", "arguments": "{}"},
        }
    ]
    assert turn.record["reasoning_content"] == "I should list the files."
    # the record gives the message back exactly, after a JSON round trip too (a saved trajectory)
    assert provider_message(turn.record) == turn.message
    saved = json.loads(json.dumps(turn.record))
    assert restore(saved) == (turn.message, turn.record)


def test_rewritten_tool_call_ids_keep_their_gemini_thought_signature():
    """litellm carries a Gemini 3 thought signature inside the id (``…__thought__<sig>``) and in
    the call's provider fields; an id made unique keeps both, so Gemini gets its signature back."""
    signed = {
        "id": "call_a__thought__U0lHLTE=",
        "type": "function",
        "function": {"name": "filesystem_list_files", "arguments": "{}"},
        "provider_specific_fields": {"thought_signature": "U0lHLTE="},
    }
    seen: set[str] = set()
    first = assistant_turn(litellm.Message(content=None, tool_calls=[signed]), seen)
    again = assistant_turn(litellm.Message(content=None, tool_calls=[signed, {**signed, "id": ""}]), seen)
    assert first.message["tool_calls"][0]["id"] == "call_a__thought__U0lHLTE="  # never altered when unique
    ids = [c["id"] for c in again.message["tool_calls"]]
    assert len(set(ids) | {"call_a__thought__U0lHLTE="}) == 3
    assert ids[0].endswith("__thought__U0lHLTE=") and ids[0].startswith("call_a_")
    for sent in again.message["tool_calls"]:
        assert sent["provider_specific_fields"] == {"thought_signature": "U0lHLTE="}
    assert [c["id"] for c in again.record["tool_calls"]] == ids
    assert provider_message(again.record) == again.message
    assert again.message["content"] is None  # no empty text part is invented for Gemini


def test_a_rewritten_id_drops_the_responses_replay_record_that_binds_the_old_one():
    """litellm's Responses replay record is bound by checksum to the call ids; once an id changes
    the record is dropped and the reasoning items go back as items of their own."""
    message = litellm.Message(
        content=None,
        tool_calls=[{"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        reasoning_items=[{"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []}],
        provider_specific_fields={"openai_responses_replay": {"version": 1}, "phase": "commentary"},
    )
    turn = assistant_turn(message, set())
    assert turn.message["tool_calls"][0]["id"]
    assert turn.message["provider_specific_fields"] == {"phase": "commentary"}
    assert turn.message["reasoning_items"][0]["encrypted_content"] == "ENC"


async def test_a_run_seeded_with_a_trajectory_sends_its_provider_state_back(gateway):
    """A trajectory's messages (saved as JSON) seed a new run: the recorded assistant turns go back
    to the model with their provider fields, not in their recorded form."""
    record = json.loads(
        Trajectory.model_validate(
            {
                "agent": "loop",
                "model": "m",
                "status": "max_steps",
                "started_at": "2026-01-01T00:00:00Z",
                "ended_at": "2026-01-01T00:00:01Z",
                "messages": [assistant_turn(SIGNED_TURN, set()).record],
            }
        ).model_dump_json()
    )["messages"][0]
    seed = [
        {"role": "user", "content": "List the files."},
        record,
        {"role": "tool", "tool_call_id": "toolu_01", "content": "a.txt"},
    ]
    with ScriptedLLM([{"content": "1 file."}]) as llm:
        trajectory = await run_agent(
            model="openai/m",
            api_base=llm.api_base,
            api_key="x",
            gateway_url=gateway.url,
            gateway_token=gateway.token,
            agent="loop",
            initial_messages=seed,
        )
    assert trajectory.status == RunStatus.completed, trajectory.error
    sent = llm.requests[0]["messages"][2]
    assert sent["thinking_blocks"] == record[PROVIDER_FIELDS]["thinking_blocks"]
    assert PROVIDER_FIELDS not in sent
    assert trajectory.messages[2] == record
