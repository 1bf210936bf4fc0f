"""Context summarisation: compact the middle of the conversation, keep the evidence.

When the prompt passes ``summarize_at`` of the model's window, everything between the task
(system and first user message) and the last ``keep_last_messages`` messages is replaced by
one user message holding

1. the model's own summary of its progress (a separate model call, no tools),
2. the todo list, and
3. the tool evidence: every compacted tool call with its arguments and its result flattened to
   plain text, cut to a share of the window, with the key values (addresses, paths, amounts,
   dates, numbers, ids) of any cut part listed, so facts found early survive compaction even
   when the summary misses them.

The kept tail never starts in the middle of a turn: a ``role: tool`` message stays with the
assistant message that asked for it.
"""

from __future__ import annotations

import json
from typing import Any

from agents_runner.model import ContextWindowExceeded, ModelProviderError
from agents_runner.state import AgentRun
from agents_runner.text import key_values, truncate

_TAIL_SHARE = 0.5  # of the compaction threshold the kept tail may fill
SUMMARY_MARKER = "[Context summary: earlier messages were compacted to fit the context window.]"

_SUMMARY_SYSTEM = (
    "You compress the working history of an agent that is part-way through a task. Write a concise "
    "summary for the agent itself: what it has done, what it found (exact names, numbers, paths, ids, "
    "addresses, dates), what remains to do, and any dead ends to avoid. Do not invent facts. Plain text."
)


def needs_compaction(run: AgentRun, tools: list[dict[str, Any]] | None) -> bool:
    """True when the context passes ``summarize_at`` of the model's window."""
    client = run.model_client
    if client is None:
        return False
    threshold = run.config.summarize_at * client.context_window
    return client.count_tokens(run.context, tools) > threshold


def _split(run: AgentRun) -> tuple[int, int]:
    """(end of the head, start of the kept tail) in ``run.context``."""
    head_end = 0
    for index, message in enumerate(run.context):
        if message.get("role") == "user":
            head_end = index + 1
            break
        head_end = index + 1
    keep = run.config.keep_last_messages
    while True:
        cut = max(head_end, len(run.context) - keep)
        while head_end < cut < len(run.context) and run.context[cut].get("role") == "tool":
            cut -= 1  # keep a tool result with the assistant message that asked for it
        # A tail that alone fills most of the budget would make every next turn compact again;
        # keep fewer messages then (never fewer than the last turn).
        if keep <= 1 or not _too_big(run, run.context[cut:]):
            return head_end, cut
        keep -= 1


def _too_big(run: AgentRun, tail: list[dict[str, Any]]) -> bool:
    client = run.model_client
    if client is None:
        return False
    return client.count_tokens(tail) > _TAIL_SHARE * run.config.summarize_at * client.context_window


async def compact(run: AgentRun, *, reason: str) -> bool:
    """Replace the middle of the context by a summary message; False when nothing can go."""
    head_end, cut = _split(run)
    middle = run.context[head_end:cut]
    if not middle:
        return False
    evidence = _evidence(run, middle)
    summary = await _model_summary(run, middle)
    parts = [SUMMARY_MARKER, f"Reason: {reason}. {len(middle)} messages were compacted."]
    if summary:
        parts += ["## Summary of progress", summary]
    if run.todos:
        parts += ["## Todo list", _render_todos(run.todos)]
    if evidence:
        parts += ["## Evidence from earlier tool results (flattened, possibly cut)", evidence]
    message = {"role": "user", "content": "\n\n".join(parts)}
    run.context[head_end:cut] = [message]
    run.transcript.append(message)
    run.compactions += 1
    return True


def _tool_names(messages: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = (call["function"]["name"], call["function"].get("arguments") or "")
    return names


def _evidence(run: AgentRun, middle: list[dict[str, Any]]) -> str:
    """Flattened tool results of ``middle`` (and earlier summaries' evidence), within budget."""
    calls = _tool_names(middle)
    entries: list[str] = []
    for message in middle:
        content = _text_of(message)
        if message.get("role") == "tool":
            name, arguments = calls.get(message.get("tool_call_id", ""), ("tool", ""))
            if name.startswith(("toolbelt_", "todo_")):
                continue  # meta-tools carry no world facts
            entries.append(f"- {name}({_compact_json(arguments)}) -> {' '.join(content.split())}")
        elif message.get("role") == "user" and content.startswith(SUMMARY_MARKER):
            _, _, earlier = content.partition(
                "## Evidence from earlier tool results (flattened, possibly cut)\n\n"
            )
            if earlier:
                entries.append(earlier.strip())
    if not entries:
        return ""
    client = run.model_client
    window = client.context_window if client else run.config.default_context_window
    budget_chars = int(run.config.evidence_share * window * 3.5)
    per_entry = max(300, budget_chars // len(entries))
    rendered = []
    for entry in entries:
        text, cut = truncate(entry, per_entry)
        if cut:
            values = key_values(entry[per_entry // 2 :])
            if values:
                text += "\n  key values in the cut part: " + "; ".join(values)
        rendered.append(text)
    return "\n".join(rendered)


async def _model_summary(run: AgentRun, middle: list[dict[str, Any]]) -> str:
    client = run.model_client
    if client is None:
        return ""
    room_chars = int(client.context_window * 0.5 * 3.5)
    history, _ = truncate("\n".join(_render(message) for message in middle), room_chars)
    messages = [
        {"role": "system", "content": _SUMMARY_SYSTEM},
        {"role": "user", "content": f"Task:\n{_task_text(run)}\n\nHistory to summarise:\n{history}"},
    ]
    try:
        reply = await client.complete(messages, None, step=run.steps)
    except (ContextWindowExceeded, ModelProviderError) as exc:
        # The evidence section still carries the facts; say why the summary is missing.
        return f"(no model summary: {exc})"
    return str(reply.message.get("content") or "").strip()


def _task_text(run: AgentRun) -> str:
    for message in run.context:
        if message.get("role") == "user":
            return _text_of(message)[:4000]
    return ""


def _render(message: dict[str, Any]) -> str:
    role = message.get("role", "?")
    text = _text_of(message)
    calls = [
        f"{c['function']['name']}({c['function'].get('arguments') or ''})"
        for c in message.get("tool_calls") or []
    ]
    if calls:
        text = (text + "\n" if text else "") + "calls: " + "; ".join(calls)
    return f"[{role}] {text}"


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(part.get("text", "[image]") for part in content if isinstance(part, dict))
    return str(content or "")


def _compact_json(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))[:500]
    except (json.JSONDecodeError, TypeError):
        return str(arguments)[:500]


def _render_todos(todos: list[dict[str, Any]]) -> str:
    return "\n".join(f"- [{todo['status']}] {todo['id']}: {todo['content']}" for todo in todos)
