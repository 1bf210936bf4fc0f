"""``loop``: the baseline tool-calling loop.

Every gateway tool is exposed from the start; the run ends when the model replies without tool
calls, and that reply is the final answer (an empty one fails the run).
"""

from __future__ import annotations

from agents_runner.engine import (
    answer,
    malformed_streak,
    model_turn,
    parse_arguments,
    record_call,
    run_gateway_call,
    show_images,
)
from agents_runner.gateway import ImagePart
from agents_runner.prompts import start_context
from agents_runner.registry import register_agent
from agents_runner.state import AgentRun
from atoll.errors import AtollError, ErrorCode
from atoll.tool_schemas import MAX_TOOLS
from atoll.trajectory import AgentReportedStatus, RunStatus

SYSTEM_PROMPT = """You are an autonomous agent completing a professional task inside a sandboxed workspace \
(files, mail, calendar, chat and office documents), reachable only through the tools you are given. \
Work step by step with the tools. When you are done, reply without calling a tool: that reply is your \
final answer, so state the result itself (numbers, names, file paths)."""

FINISH_HINT = "Wrap up now: reply without a tool call to give your final answer before the limit."


@register_agent("loop")  # declared in agents_runner/registry.py
async def loop(run: AgentRun) -> RunStatus:
    assert run.gateway is not None
    available = await run.gateway.list_tools()
    if len(available) > MAX_TOOLS:
        # Every tool goes into every request, and OpenAI refuses more than MAX_TOOLS.
        raise AtollError(
            ErrorCode.bad_config,
            f"the loop agent sends every gateway tool, and the gateway has {len(available)} "
            f"(at most {MAX_TOOLS} per request): use react_toolbelt or consolidated servers",
        )
    names = {tool.name for tool in available}
    tools = [tool.as_openai_tool() for tool in available]
    if run.resumed:  # the context is the checkpoint's
        malformed_turns = int(run.agent_state.get("malformed_turns", 0))
    else:
        start_context(run, SYSTEM_PROMPT)
        malformed_turns = 0
    while True:
        run.agent_state = {"malformed_turns": malformed_turns}
        reply = await model_turn(run, tools, finish_hint=FINISH_HINT)
        if not reply.tool_calls:
            text = str(reply.message.get("content") or "").strip()
            if not text:
                return RunStatus.failed
            run.final_answer = text
            run.reported_status = AgentReportedStatus.completed
            return RunStatus.completed
        images: list[tuple[str, ImagePart]] = []
        malformed = False
        for call in reply.tool_calls:
            call_id, name, raw = call["id"], call["function"]["name"], call["function"]["arguments"]
            arguments, problem = parse_arguments(raw)
            if arguments is None:
                malformed = True
                text = record_call(
                    run,
                    call_id,
                    name,
                    raw,
                    f"error: {problem}; the call was not executed.",
                    is_error=True,
                    error=problem,
                )
            elif name not in names:
                text = record_call(
                    run,
                    call_id,
                    name,
                    arguments,
                    f"error: no tool named {name!r}.",
                    is_error=True,
                    error="unknown tool",
                )
            else:
                text = await run_gateway_call(run, call_id, name, arguments, images)
            answer(run, call_id, text)
        show_images(run, images)
        malformed_turns = malformed_streak(run, malformed_turns, malformed)
