"""The default agent: toolbelt meta-tools, todos, final_answer rules, one result per call."""

from __future__ import annotations

from agents_runner import run_agent
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import AgentReportedStatus, RunStatus

from .conftest import FACT, assert_every_call_answered_once, call, tool_messages


def _tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


async def _run(llm: ScriptedLLM, gateway, **kwargs):
    kwargs.setdefault("prompt", "Find the settlement wire reference.")
    return await run_agent(
        model="openai/scripted",
        api_base=llm.api_base,
        api_key="x",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        **kwargs,
    )


async def test_toolbelt_todos_and_final_answer(gateway):
    script = [
        {
            "tool_calls": [
                call("toolbelt_list_tools", filter="mail"),
                call("toolbelt_add_tool", tool_name="mail_search_mail"),
            ]
        },
        {
            "tool_calls": [
                call(
                    "todo_write",
                    todos=[{"id": "find", "content": "find the reference", "status": "in_progress"}],
                )
            ]
        },
        {
            "tool_calls": [
                call("mail_search_mail", query="settlement"),
                call("final_answer", answer="too early"),
            ]
        },
        {
            "tool_calls": [
                call("todo_write", todos=[{"id": "find", "status": "completed"}], merge=True),
                call("final_answer", answer="HX-40917-Q", status="completed"),
            ]
        },
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway)
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert trajectory.agent_reported_status == AgentReportedStatus.completed
    assert trajectory.final_answer == "HX-40917-Q"
    assert trajectory.steps == 4
    assert_every_call_answered_once(trajectory)
    # the model starts with meta-tools only, and sees a tool once it is added
    assert "mail_search_mail" not in _tool_names(llm.requests[0])
    assert "final_answer" in _tool_names(llm.requests[0])
    assert "mail_search_mail" in _tool_names(llm.requests[1])
    results = tool_messages(trajectory)
    assert "mail_search_mail: Search the mailbox." in results["call_0_0"]
    assert "filesystem_read_text_file" not in results["call_0_0"]  # filtered
    # a final_answer in the same turn as another call: the other call's result is kept
    assert FACT in results["call_2_0"]
    assert "refused" in results["call_2_1"] and "find" in results["call_2_1"]
    assert trajectory.todos == [{"id": "find", "content": "find the reference", "status": "completed"}]
    names = [tool_call.name for tool_call in trajectory.tool_calls]
    assert names.count("final_answer") == 2
    assert trajectory.usage.prompt_tokens > 0 and len(trajectory.model_calls) == 4


async def test_blocked_answer_fails_the_run_but_keeps_the_agents_status(gateway):
    script = [
        {"tool_calls": [call("final_answer", answer="I cannot reach the bank portal.", status="blocked")]}
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway)
    assert trajectory.status == RunStatus.failed
    assert trajectory.agent_reported_status == AgentReportedStatus.blocked
    assert trajectory.final_answer == "I cannot reach the bank portal."
    assert trajectory.error is None


async def test_calls_outside_the_toolbelt_and_unknown_tools_get_error_results(gateway):
    script = [
        {
            "tool_calls": [
                call("mail_send_mail", to_email="a@b.c", subject="s", body="b"),
                call("mail_serch_mail", query="x"),
            ]
        },
        {"tool_calls": [call("toolbelt_inspect_tool", tool_name="mail_send_mail")]},
        {"tool_calls": [call("final_answer", answer="done")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway)
    results = tool_messages(trajectory)
    assert "not in your toolbelt" in results["call_0_0"]
    assert "Did you mean: mail_search_mail" in results["call_0_1"]
    assert '"to_email"' in results["call_1_0"]  # the schema is shown
    assert gateway.world.sent == []  # nothing was executed
    assert trajectory.status == RunStatus.completed, trajectory.error


async def test_toolbelt_size_is_enforced(gateway):
    script = [
        {
            "tool_calls": [
                call("toolbelt_add_tool", tool_name="mail_search_mail"),
                call("toolbelt_add_tool", tool_name="mail_send_mail"),
            ]
        },
        {
            "tool_calls": [
                call("toolbelt_remove_tool", tool_name="mail_search_mail"),
                call("toolbelt_add_tool", tool_name="mail_send_mail"),
            ]
        },
        {"tool_calls": [call("final_answer", answer="ok")]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"toolbelt_size": 1})
    results = tool_messages(trajectory)
    assert "toolbelt is full" in results["call_0_1"]
    assert "added mail_send_mail" in results["call_1_1"]
    assert _tool_names(llm.requests[2])[-1] == "mail_send_mail"
    assert "mail_search_mail" not in _tool_names(llm.requests[2])


async def test_text_only_replies_are_nudged_then_fail(gateway):
    script = [{"content": "Let me think."}, {"content": "The answer is 42."}]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"max_text_only_replies": 2})
    assert trajectory.status == RunStatus.failed
    assert trajectory.error.kind == "agent"
    assert trajectory.final_answer == "The answer is 42."
    assert "without calling a tool" in llm.requests[1]["messages"][-1]["content"]


async def test_repeated_or_missing_tool_call_ids_are_made_unique(gateway):
    """Some local servers send the same id for every call; each call still gets its own answer."""
    script = [
        {"tool_calls": [{"name": "toolbelt_list_tools", "arguments": {}, "id": "call_0"}] * 2},
        {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "ok"}, "id": "call_0"}]},
    ]
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway)
    assert trajectory.status == RunStatus.completed
    ids = [c["id"] for m in trajectory.messages for c in m.get("tool_calls") or []]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert_every_call_answered_once(trajectory)
    sent_back = llm.requests[1]["messages"]
    assert [c["id"] for c in sent_back[-3]["tool_calls"]] == ids[:2]


async def test_initial_toolbelt_and_todos_sent_as_a_json_string(gateway):
    script = [
        {"tool_calls": [call("mail_search_mail", query="Halvorsen"), call("todo_write", todos='[{"id": "a", "content": "x", "status": "completed"}]')]},
        {"tool_calls": [call("final_answer", answer="HX-40917-Q")]},
    ]  # fmt: skip
    with ScriptedLLM(script) as llm:
        trajectory = await _run(llm, gateway, config={"initial_toolbelt": ["mail_search_mail"]})
    assert "mail_search_mail" in _tool_names(llm.requests[0])
    assert trajectory.status == RunStatus.completed
    assert trajectory.todos == [{"id": "a", "content": "x", "status": "completed"}]


async def test_unknown_initial_toolbelt_tool_is_a_clear_error(gateway):
    with ScriptedLLM([]) as llm:
        trajectory = await _run(llm, gateway, config={"initial_toolbelt": ["mail_serch_mail"]})
    assert trajectory.status == RunStatus.error
    assert "initial_toolbelt: no tool named 'mail_serch_mail'" in trajectory.error.message
    assert llm.requests == []
