"""Summarisation, truncation and images: what the model sees of long and rich tool results."""

from __future__ import annotations

from agents_runner import run_agent
from agents_runner.summarize import SUMMARY_MARKER
from agents_runner.text import key_values, truncate
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus

from .conftest import FACT, assert_every_call_answered_once, call, tool_messages


async def _run(llm: ScriptedLLM, gateway, **kwargs):
    return await run_agent(
        model=kwargs.pop("model", "openai/scripted"),
        api_base=llm.api_base,
        api_key="x",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt="Find the wire reference of the Halvorsen settlement, then report it.",
        **kwargs,
    )


def _filler(turn: int) -> str:
    return " ".join(f"thought{turn}-{n}" for n in range(150))


def _is_summary_request(body: dict) -> bool:
    return "compress the working history" in str(body["messages"][0]["content"])


async def test_fact_from_an_early_tool_result_survives_compaction(gateway):
    """The summary model forgets the fact; the carried evidence keeps it."""
    turns = iter(
        [
            {"tool_calls": [call("toolbelt_add_tool", tool_name="mail_search_mail")]},
            {"tool_calls": [call("mail_search_mail", query="Halvorsen")]},
            *[{"tool_calls": [call("toolbelt_list_tools")], "content": _filler(turn)} for turn in range(12)],
            {"tool_calls": [call("final_answer", answer="HX-40917-Q")]},
        ]
    )

    def script(body):
        if _is_summary_request(body):
            return {"content": "I searched the mail and listed tools."}  # no reference in it
        return next(turns)

    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"context_window": 4000, "keep_last_messages": 4})
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.compactions >= 1
    last = llm.requests[-1]["messages"]
    # the search result message itself is gone from the context ...
    assert not any(m.get("role") == "tool" and FACT in str(m.get("content")) for m in last)
    # ... but the fact is still there, in the summary's evidence
    summaries = [m["content"] for m in last if SUMMARY_MARKER in str(m.get("content"))]
    assert len(summaries) == 1
    assert "HX-40917-Q" in summaries[0] and "$48,213.07" in summaries[0]
    assert "mail_search_mail" in summaries[0]
    # the task stays, the context stays under the window, tool pairs stay intact
    assert last[1]["content"].startswith("Find the wire reference")
    assert all(len(str(body["messages"])) < 4000 * 4 * 1.2 for body in llm.requests)
    first_kept = last[3]
    assert first_kept.get("role") != "tool"
    assert_every_call_answered_once(trajectory)
    # the full transcript keeps everything, the summary included
    assert any(FACT in str(m.get("content")) for m in trajectory.messages if m.get("role") == "tool")


async def test_long_tool_results_are_truncated_with_the_omitted_span_stated(gateway):
    script = [
        {"tool_calls": [call("toolbelt_add_tool", tool_name="filesystem_read_big_file")]},
        {"tool_calls": [call("filesystem_read_big_file")]},
        {"tool_calls": [call("final_answer", answer="read")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"tool_result_max_chars": 1000})
    seen = tool_messages(trajectory)["call_1_0"]
    assert seen.startswith("line 00000")
    assert "truncated: characters 700-" in seen and "of 55000 omitted" in seen
    assert seen.rstrip().endswith("line 04999")
    assert trajectory.tool_calls[1].truncated
    assert llm.requests[2]["messages"][-1]["content"] == seen


async def test_images_are_shown_to_models_that_accept_them(gateway):
    script = [
        {"tool_calls": [call("toolbelt_add_tool", tool_name="pdfs_render_page")]},
        {"tool_calls": [call("pdfs_render_page", file_path="/a.pdf")]},
        {"tool_calls": [call("final_answer", answer="seen")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"supports_images": True})
    shown = llm.requests[2]["messages"][-1]
    assert shown["role"] == "user"
    assert shown["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert "base64" not in str(trajectory.messages)  # the trajectory keeps a note, not the bytes
    assert trajectory.status == RunStatus.completed


async def test_images_are_described_to_text_only_models(gateway):
    script = [
        {"tool_calls": [call("toolbelt_add_tool", tool_name="pdfs_render_page")]},
        {"tool_calls": [call("pdfs_render_page", file_path="/a.pdf")]},
        {"tool_calls": [call("final_answer", answer="not seen")]},
    ]
    with ScriptedLLM(script) as llm:
        await _run(llm, gateway, config={"supports_images": False})
    assert "does not accept images" in llm.requests[2]["messages"][-1]["content"]
    assert not any(isinstance(m.get("content"), list) for m in llm.requests[2]["messages"])


def test_truncate_keeps_head_and_tail():
    text = "a" * 100 + "b" * 100
    cut, truncated = truncate(text, 50)
    assert truncated and cut.startswith("a" * 35) and cut.endswith("b" * 15)
    assert "characters 35-185 of 200 omitted" in cut
    assert truncate("short", 50) == ("short", False)


def test_key_values_finds_addresses_amounts_dates_and_paths():
    values = key_values(
        "Mail ap@halvorsen.example about /Reports/Q3 memo.docx: $48,213.07 due 2025-03-04, 12.5%"
    )
    assert {"ap@halvorsen.example", "/Reports/Q3 memo.docx", "$48,213.07", "2025-03-04", "12.5%"} <= set(
        values
    )
