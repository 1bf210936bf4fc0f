"""A scripted OpenAI-compatible chat server for tests, benchmarks and offline demos.

``ScriptedLLM`` serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) on
``127.0.0.1`` at a free port from a background thread, answering each request with the
next item of a *script*.  Point litellm at it with ``model="openai/<anything>"``,
``api_base=llm.api_base`` and any ``api_key``::

    from atoll.testing.scripted_llm import ScriptedLLM

    script = [
        {"tool_calls": [{"name": "mail_search_mail", "arguments": {"query": "invoice"}}]},
        {"content": "The invoice total is 42.", "usage": {"prompt_tokens": 120, "completion_tokens": 9}},
    ]
    with ScriptedLLM(script) as llm:
        response = litellm.completion(model="openai/x", api_base=llm.api_base, api_key="x", messages=[...])
        assert llm.requests[0]["messages"][0]["role"] == "system"

The script
    A list consumed in order (one item per request), or a callable
    ``script(request_body: dict) -> item`` called for every request (it may keep its own
    state; it runs in the server thread).  When a list is used up, every further request
    gets HTTP 500 with the message ``script exhausted after N requests`` so a test that
    makes more model calls than it scripted fails loudly instead of hanging.

An item is a dict with any of
    ``content``      the assistant text (``None``/absent = no text).
    ``reasoning_content`` the reasoning text, sent as OpenAI-compatible reasoning servers
                     (vLLM, Kimi K2 Thinking) send it: a ``reasoning_content`` message field.
    ``tool_calls``   ``[{"name": str, "arguments": dict | str, "id": str (optional)}]``;
                     a dict is JSON-encoded, a str is sent verbatim (so malformed JSON can be
                     scripted).  Ids default to ``call_<request>_<index>``.
    ``usage``        ``{"prompt_tokens", "completion_tokens", ...}`` merged over the default
                     (prompt = rough length of the request / 4, completion = 1 + len(content)/4).
                     Extra keys (``completion_tokens_details``, ``prompt_tokens_details``) are
                     passed through so reasoning and cached tokens can be scripted.
    ``finish_reason`` defaults to ``tool_calls`` when there are tool calls, else ``stop``.
    ``status``       an HTTP error status (429, 500, 400, ...); with optional ``headers``
                     (e.g. ``{"Retry-After": "1"}``) and ``body`` (dict sent as JSON, or str).
                     The default body is an OpenAI-style ``{"error": {...}}``.  A context
                     window error is ``{"status": 400, "body": CONTEXT_LENGTH_EXCEEDED}``
                     (a reasoning model's refused temperature: ``TEMPERATURE_UNSUPPORTED``).
    ``delay_s``      seconds to sleep before answering (slow responses, timeouts).
    ``hang``         True: accept the request and never answer (until the server stops), like a
                     wedged model server; the client's own timeout must end the call.
    ``model``        model name echoed in the response (default: the requested model).

Requests with ``"stream": true`` are answered as Server-Sent Events with the same content
and tool calls (one chunk per tool call, then a usage chunk and ``[DONE]``).

``llm.requests`` holds every received JSON body, in arrival order (including those answered
with errors), and ``llm.request_headers`` their headers (names lower-cased).  ``llm.url`` is the server root and
``llm.api_base`` is ``<url>/v1``.  ``llm.max_in_flight`` is the most requests it was answering
at once (a concurrency limit in front of it shows there).

:func:`refused_api_base` gives an ``api_base`` on a loopback port where nothing listens
(every connection is refused), for tests of a misconfigured endpoint.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from atoll.testing.loopback import (
    LoopbackHandler,
    LoopbackHTTPServer,
    LoopbackService,
    Script,
    ScriptItem,
    serve_on_loopback,
)

CONTEXT_LENGTH_EXCEEDED: dict[str, Any] = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
"""Body of the error OpenAI returns when a prompt exceeds the model's context window."""

TEMPERATURE_UNSUPPORTED: dict[str, Any] = {
    "error": {
        "message": "Unsupported value: 'temperature' does not support 0.0 with this model. Only the "
        "default (1) value is supported.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_value",
    }
}
"""Body of the error OpenAI returns when a reasoning model is sent ``temperature: 0.0``
(platform.openai.com, "Reasoning models": only the default temperature is supported)."""

__all__ = [
    "CONTEXT_LENGTH_EXCEEDED",
    "LoopbackHTTPServer",
    "Script",
    "ScriptItem",
    "ScriptedLLM",
    "TEMPERATURE_UNSUPPORTED",
    "chat_completion",
    "chat_completion_chunks",
    "refused_api_base",
    "serve_on_loopback",
]


def refused_api_base() -> str:
    """``http://127.0.0.1:PORT/v1`` for a port that was free a moment ago: connecting to it
    is refused (the port is closed again before this returns)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class ScriptedLLM(LoopbackService):
    """A context manager running the scripted server; see the module docstring."""

    thread_name = "scripted-llm"

    def __init__(self, script: Script, *, model_name: str = "scripted") -> None:
        super().__init__(script)
        self.model_name = model_name
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._stopped = threading.Event()
        self.in_flight = 0
        self.max_in_flight = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("_BoundHandler", (_Handler,), {"llm": self})

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        self._stopped.clear()
        return super().start()

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent); hung requests are released."""
        self._stopped.set()
        super().stop()

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def remaining(self) -> int:
        """Script items not yet consumed (0 for a callable script)."""
        with self._lock:
            return max(0, len(self._items) - self._next)

    # --- script -------------------------------------------------------------------------

    def _record_and_pick(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, ScriptItem | None]:
        """Record the request and return (request index, item or None when exhausted)."""
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.request_headers.append(headers)
            if self._callable is not None:
                return index, _CALL
            if self._next >= len(self._items):
                return index, None
            item = self._items[self._next]
            self._next += 1
            return index, item


_CALL: ScriptItem = {}  # sentinel: ask the callable (outside the lock, so it may be slow)


class _Handler(LoopbackHandler):
    llm: ScriptedLLM

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [_model_entry(self.llm.model_name)]})
        elif self.path.rstrip("/") in ("", "/health"):
            self._send_json(200, {"status": "ok"})
        else:
            self._send_error(404, f"no route GET {self.path}", "not_found")

    def do_POST(self) -> None:
        raw = self.read_body()
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"no route POST {self.path}", "not_found")
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_error(400, f"request body is not JSON: {exc}", "invalid_json")
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        with self.llm._lock:
            self.llm.in_flight += 1
            self.llm.max_in_flight = max(self.llm.max_in_flight, self.llm.in_flight)
        try:
            self._answer(body, headers)
        finally:
            with self.llm._lock:
                self.llm.in_flight -= 1

    def _answer(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        index, item = self.llm._record_and_pick(body, headers)
        if item is _CALL:
            try:
                item = self.llm._callable(body)  # type: ignore[misc]
            except Exception as exc:  # a broken test script must surface, not hang
                self._send_error(500, f"script callable raised {type(exc).__name__}: {exc}", "script_error")
                return
        if item is None:
            self._send_error(500, f"script exhausted after {index} requests", "script_exhausted")
            return
        if item.get("hang"):
            self.llm._stopped.wait()
            self.close_connection = True
            return
        if item.get("delay_s"):
            time.sleep(float(item["delay_s"]))
        if item.get("status") and int(item["status"]) >= 300:
            self._send_scripted_error(item)
            return
        completion = chat_completion(item, body, index, self.llm.model_name)
        if body.get("stream"):
            self._send_stream(completion)
        else:
            self._send_json(200, completion)

    # --- responses ----------------------------------------------------------------------

    def _send_scripted_error(self, item: ScriptItem) -> None:
        status = int(item["status"])
        payload = item.get("body")
        if payload is None:
            payload = {"error": {"message": f"scripted error {status}", "type": "scripted", "code": status}}
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_bytes(status, data, "application/json", item.get("headers") or {})

    def _send_error(self, status: int, message: str, code: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": "scripted_llm", "code": code}})

    def _send_json(self, status: int, payload: Any) -> None:
        self.send_bytes(status, json.dumps(payload).encode(), "application/json", {})

    def _send_stream(self, completion: dict[str, Any]) -> None:
        chunks = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chat_completion_chunks(completion)]
        self.send_events(200, [*chunks, b"data: [DONE]\n\n"])


def _model_entry(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "atoll-scripted"}


def chat_completion(
    item: ScriptItem, request: dict[str, Any], index: int, default_model: str
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` answering ``request`` (the ``index``-th) with script ``item``."""
    content = item.get("content")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if item.get("reasoning_content"):
        message["reasoning_content"] = item["reasoning_content"]
    tool_calls = []
    for position, call in enumerate(item.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        tool_calls.append(
            {
                "id": call.get("id") or f"call_{index}_{position}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt_estimate = max(1, len(json.dumps(request.get("messages", []))) // 4)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_estimate,
        "completion_tokens": 1 + len(content or "") // 4 + 10 * len(tool_calls),
    }
    usage.update(item.get("usage") or {})
    usage["total_tokens"] = int(usage["prompt_tokens"]) + int(usage["completion_tokens"])
    return {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": item.get("model") or request.get("model") or default_model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": item.get("finish_reason") or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


def chat_completion_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """``completion`` as the ``chat.completion.chunk`` objects of a stream (usage chunk last)."""
    base = {key: completion[key] for key in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]
    chunks = []
    if message.get("reasoning_content"):
        delta = {"role": "assistant", "reasoning_content": message["reasoning_content"]}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
    chunks.append(
        {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": message["content"] or ""}}],
        }
    )
    for position, call in enumerate(message.get("tool_calls") or []):
        delta = {"tool_calls": [{"index": position, **call}]}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks
