"""``react_toolbelt``: a ReAct loop whose tools the agent picks itself (the default agent).

The model starts with meta-tools only: it lists and inspects the gateway's tools, adds the ones
it needs to its toolbelt (at most ``toolbelt_size``), plans with ``todo_write`` and finishes with
``final_answer(answer, status)``, which is refused while todos are open.  Every tool call of a
turn gets exactly one result; ``final_answer`` is handled after the turn's other calls, so their
results are never dropped.
"""

from __future__ import annotations

import contextlib
import difflib
import json
from typing import Any

from agents_runner.engine import (
    answer,
    malformed_streak,
    model_turn,
    parse_arguments,
    record_call,
    run_gateway_call,
    show_images,
)
from agents_runner.gateway import ImagePart, ToolSpec
from agents_runner.prompts import start_context
from agents_runner.registry import register_agent
from agents_runner.state import AgentRun, RunEnded
from agents_runner.text import one_line
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import AgentReportedStatus, ErrorKind, RunStatus

SYSTEM_PROMPT = """You are an autonomous agent completing a professional task inside a sandboxed workspace \
(files, mail, calendar, chat and office documents), reachable only through tools.

How to work:
- You start with meta-tools. Call toolbelt_list_tools (optionally with a filter) to see the workspace's \
tools, toolbelt_inspect_tool to read one tool's full description and arguments, and toolbelt_add_tool to \
add a tool to your toolbelt before calling it. Remove tools you no longer need with toolbelt_remove_tool.
- Plan with todo_write: keep a short todo list and update item statuses as you go.
- Work step by step: call tools, read their results, verify your work.
- When done, call final_answer(answer, status). status is "completed" when the task is done, \
"blocked" when it cannot be done with what you have, "failed" when you gave up. final_answer is refused \
while todos are pending or in progress: mark each completed or cancelled first.
- Your answer is read as the deliverable: state the result itself (numbers, names, file paths), \
not a description of what you did."""

FINISH_HINT = "Wrap up now and call final_answer before the limit."
_OPEN = ("pending", "in_progress")
_TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled")


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


META_TOOLS = [
    _tool(
        "toolbelt_list_tools",
        "List the workspace's tools (name and one-line description); marks those in your toolbelt.",
        {
            "filter": {
                "type": "string",
                "description": "Only tools whose name or description contains this text",
            }
        },
        [],
    ),
    _tool(
        "toolbelt_inspect_tool",
        "Show one tool's full description and argument schema.",
        {"tool_name": {"type": "string"}},
        ["tool_name"],
    ),
    _tool(
        "toolbelt_add_tool",
        "Add a workspace tool to your toolbelt so you can call it.",
        {"tool_name": {"type": "string"}},
        ["tool_name"],
    ),
    _tool(
        "toolbelt_remove_tool",
        "Remove a tool from your toolbelt.",
        {"tool_name": {"type": "string"}},
        ["tool_name"],
    ),
    _tool(
        "todo_write",
        "Write your todo list. merge=false replaces the list; merge=true updates items by id and adds new ones.",
        {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(_TODO_STATUSES)},
                    },
                    "required": ["id"],
                },
            },
            "merge": {"type": "boolean", "default": False},
        },
        ["todos"],
    ),
    _tool(
        "final_answer",
        "Submit your final answer and end the task.",
        {
            "answer": {"type": "string"},
            "status": {
                "type": "string",
                "enum": [s.value for s in AgentReportedStatus],
                "default": "completed",
            },
        },
        ["answer"],
    ),
]
META_NAMES = {tool["function"]["name"] for tool in META_TOOLS}


class _Toolbelt:
    def __init__(self, available: list[ToolSpec], size: int) -> None:
        self.available = {tool.name: tool for tool in available if tool.name not in META_NAMES}
        self.size = size
        self.held: list[str] = []

    def openai_tools(self) -> list[dict[str, Any]]:
        return META_TOOLS + [self.available[name].as_openai_tool() for name in self.held]

    def unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.available), n=3, cutoff=0.5)
        hint = (
            f" Did you mean: {', '.join(close)}?" if close else " Use toolbelt_list_tools to see the tools."
        )
        return f"error: no tool named {name!r}.{hint}"

    def list(self, arguments: dict[str, Any]) -> str:
        needle = str(arguments.get("filter") or "").lower()
        lines = [
            f"{'* ' if tool.name in self.held else '  '}{tool.name}: {tool.summary}"
            for tool in self.available.values()
            if needle in tool.name.lower() or needle in tool.description.lower()
        ]
        if not lines:
            return f"no tool matches {needle!r}; {len(self.available)} tools exist (call without filter)."
        header = f"{len(lines)} tools (* = in your toolbelt, {len(self.held)}/{self.size} held):"
        return "\n".join([header, *lines])

    def inspect(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        name = str(arguments.get("tool_name") or "")
        tool = self.available.get(name)
        if tool is None:
            return self.unknown(name), True
        body = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        return json.dumps(body, indent=1, ensure_ascii=False), False

    def add(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        name = str(arguments.get("tool_name") or "")
        if name not in self.available:
            return self.unknown(name), True
        if name in self.held:
            return f"{name} is already in your toolbelt.", False
        if len(self.held) >= self.size:
            return (
                f"error: your toolbelt is full ({self.size} tools); remove one with toolbelt_remove_tool first.",
                True,
            )
        self.held.append(name)
        return (
            f"added {name}; you can call it from your next reply ({len(self.held)}/{self.size} held).",
            False,
        )

    def remove(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        name = str(arguments.get("tool_name") or "")
        if name not in self.held:
            return f"error: {name!r} is not in your toolbelt.", True
        self.held.remove(name)
        return f"removed {name}.", False


def _todo_write(run: AgentRun, arguments: dict[str, Any]) -> tuple[str, bool]:
    items = arguments.get("todos")
    if isinstance(items, str):  # some models send the list as a JSON string
        with contextlib.suppress(json.JSONDecodeError):
            items = json.loads(items)
    if not isinstance(items, list):
        return "error: todos must be a list of {id, content, status}.", True
    merge = bool(arguments.get("merge", False))
    current = {todo["id"]: todo for todo in run.todos} if merge else {}
    for position, item in enumerate(items):
        if not isinstance(item, dict) or not str(item.get("id") or "").strip():
            return f"error: todo #{position} needs an id.", True
        status = item.get("status", current.get(str(item["id"]), {}).get("status", "pending"))
        if status not in _TODO_STATUSES:
            return (
                f"error: todo {item['id']!r} has status {status!r}; use one of {', '.join(_TODO_STATUSES)}.",
                True,
            )
        todo_id = str(item["id"])
        content = item.get("content", current.get(todo_id, {}).get("content", ""))
        current[todo_id] = {"id": todo_id, "content": str(content), "status": status}
    run.todos = list(current.values())
    open_count = sum(todo["status"] in _OPEN for todo in run.todos)
    lines = [f"- [{todo['status']}] {todo['id']}: {todo['content']}" for todo in run.todos]
    return "\n".join([f"todo list ({open_count} open):", *lines]), False


def _final_answer(run: AgentRun, arguments: dict[str, Any]) -> tuple[str, bool, bool]:
    """(result text, is_error, accepted)."""
    status_text = str(arguments.get("status") or "completed")
    try:
        status = AgentReportedStatus(status_text)
    except ValueError:
        return f"error: status must be completed, blocked or failed, not {status_text!r}.", True, False
    if "answer" not in arguments:
        return "error: final_answer needs an answer.", True, False
    open_todos = [todo["id"] for todo in run.todos if todo["status"] in _OPEN]
    if open_todos:
        return (
            f"error: final answer refused: {len(open_todos)} todos are still open ({', '.join(open_todos)}). "
            "Finish them, or mark them completed or cancelled with todo_write, then call final_answer again.",
            True,
            False,
        )
    run.final_answer = str(arguments["answer"])
    run.reported_status = status
    return "final answer recorded.", False, True


@register_agent("react_toolbelt")  # declared in agents_runner/registry.py
async def react_toolbelt(run: AgentRun) -> RunStatus:
    config = run.config
    assert run.gateway is not None
    toolbelt = _Toolbelt(await run.gateway.list_tools(), config.toolbelt_size)
    if run.resumed:  # the context is the checkpoint's; the toolbelt and counters are too
        state = run.agent_state
        for name in state.get("toolbelt", []):
            text, is_error = toolbelt.add({"tool_name": name})
            if is_error:
                raise AtollError(
                    ErrorCode.bad_checkpoint, f"the checkpoint's toolbelt: {text.removeprefix('error: ')}"
                )
        malformed_turns = int(state.get("malformed_turns", 0))
        text_only_replies = int(state.get("text_only_replies", 0))
    else:
        for name in config.initial_toolbelt:
            text, is_error = toolbelt.add({"tool_name": name})
            if is_error:
                raise AtollError(ErrorCode.bad_config, f"initial_toolbelt: {text.removeprefix('error: ')}")
        start_context(run, SYSTEM_PROMPT)
        malformed_turns = 0
        text_only_replies = 0
    while True:
        run.agent_state = {
            "toolbelt": list(toolbelt.held),
            "malformed_turns": malformed_turns,
            "text_only_replies": text_only_replies,
        }
        reply = await model_turn(run, toolbelt.openai_tools(), finish_hint=FINISH_HINT)
        if not reply.tool_calls:
            text_only_replies += 1
            text = str(reply.message.get("content") or "").strip()
            if text_only_replies >= config.max_text_only_replies:
                run.final_answer = text or None
                raise RunEnded(
                    RunStatus.failed,
                    f"the model replied {text_only_replies} times in a row without calling a tool or final_answer",
                    kind=ErrorKind.agent,
                )
            run.add(
                {
                    "role": "user",
                    "content": "[harness] You replied without calling a tool. Keep working with your tools, "
                    "or call final_answer(answer, status) to finish.",
                }
            )
            continue
        text_only_replies = 0
        finals: list[tuple[str, dict[str, Any]]] = []
        results: dict[str, str] = {}
        images: list[tuple[str, ImagePart]] = []
        malformed = False
        for call in reply.tool_calls:
            call_id, name, raw = call["id"], call["function"]["name"], call["function"]["arguments"]
            arguments, problem = parse_arguments(raw)
            if arguments is None:
                malformed = True
                results[call_id] = record_call(
                    run,
                    call_id,
                    name,
                    raw,
                    f"error: {problem}; the call was not executed.",
                    is_error=True,
                    error=problem,
                )
            elif name == "final_answer":
                finals.append((call_id, arguments))  # handled after the turn's other calls
            elif name in META_NAMES:
                results[call_id] = _meta(run, toolbelt, call_id, name, arguments)
            elif name in toolbelt.held:
                results[call_id] = await run_gateway_call(run, call_id, name, arguments, images)
            elif name in toolbelt.available:
                results[call_id] = record_call(
                    run,
                    call_id,
                    name,
                    arguments,
                    f"error: {name} is not in your toolbelt; add it with toolbelt_add_tool first.",
                    is_error=True,
                    error="tool not in toolbelt",
                )
            else:
                results[call_id] = record_call(
                    run, call_id, name, arguments, toolbelt.unknown(name), is_error=True, error="unknown tool"
                )
        accepted = False
        for position, (call_id, arguments) in enumerate(finals):
            if accepted or position > 0:
                text, is_error = (
                    "error: only one final_answer per reply is considered; this one was ignored.",
                    True,
                )
            else:
                text, is_error, accepted = _final_answer(run, arguments)
            results[call_id] = record_call(run, call_id, "final_answer", arguments, text, is_error=is_error)
        for call in reply.tool_calls:  # answers in the order the model asked
            answer(run, call["id"], results[call["id"]])
        show_images(run, images)
        if accepted:
            if run.reported_status == AgentReportedStatus.completed:
                return RunStatus.completed
            return RunStatus.failed
        malformed_turns = malformed_streak(run, malformed_turns, malformed)


def _meta(run: AgentRun, toolbelt: _Toolbelt, call_id: str, name: str, arguments: dict[str, Any]) -> str:
    if name == "toolbelt_list_tools":
        text, is_error = toolbelt.list(arguments), False
    elif name == "toolbelt_inspect_tool":
        text, is_error = toolbelt.inspect(arguments)
    elif name == "toolbelt_add_tool":
        text, is_error = toolbelt.add(arguments)
    elif name == "toolbelt_remove_tool":
        text, is_error = toolbelt.remove(arguments)
    else:
        text, is_error = _todo_write(run, arguments)
    return record_call(
        run, call_id, name, arguments, text, is_error=is_error, error=one_line(text) if is_error else None
    )
