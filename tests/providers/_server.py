"""What every provider emulator shares: the loopback server, the script, the records, signing.

A provider emulator is a :class:`ProviderEmulator` subclass that says how its provider
routes requests (:meth:`ProviderEmulator.endpoint`), which documented request rules it
enforces (:meth:`ProviderEmulator.check`, raising :class:`Rejected`), how its native error
body looks (:meth:`ProviderEmulator.error_body`) and how it answers a script item in its
native JSON and SSE forms (:meth:`ProviderEmulator.answer`).  The server itself is
:class:`atoll.testing.loopback.LoopbackService`, the one ``ScriptedLLM`` runs on.

Script items (a list consumed in order, or a callable ``script(request_body) -> item``)
are those of ``ScriptedLLM`` plus ``thinking``; every emulator understands

    ``content``     the assistant's text.
    ``tool_calls``  ``[{"name": str, "arguments": dict, "id": str (optional)}]``.
    ``thinking``    what the model thinks before answering; emitted in the provider's native
                    reasoning form only when the request enables thinking (a default text is
                    used when the request enables thinking and the item has none).
    ``usage``       native usage fields merged over the emulator's estimate.
    ``status``      an HTTP error status answered instead (with optional ``body``/``headers``).
    ``delay_s``     seconds to wait before answering.

A request refused by a rule does not consume a script item.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

import httpx

from atoll.testing.loopback import LoopbackHandler, LoopbackService, Script, ScriptItem, split_script

DEFAULT_THINKING = "Let me work out which step comes next."
"""The thinking text emitted when a request enables thinking and its script item has none."""


class Rejected(Exception):
    """A request broke a documented rule: ``rule`` is the emulator's rule id, ``message`` the
    provider's own wording, answered with ``status`` in the provider's error format; ``fields``
    are merged into the error object (e.g. OpenAI's ``param`` and ``code``)."""

    def __init__(
        self, rule: str, message: str, status: int = 400, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message
        self.status = status
        self.fields = fields or {}


@dataclass
class Request:
    """One received request, as the emulator's hooks see it."""

    index: int
    path: str  # without the query string
    query: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class Reply:
    """A JSON answer (``payload``) or a stream of SSE ``events`` (``(event name or None, data)``)."""

    status: int = 200
    payload: Any = None
    events: list[tuple[str | None, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)


class ProviderEmulator(LoopbackService):
    """A context manager serving one provider's wire protocol on 127.0.0.1 (see module doc).

    Attributes after requests: ``requests`` (every received JSON body, in order),
    ``request_paths`` (their paths), ``request_headers`` (lower-cased names) and
    ``rejections`` (``(rule id, message)`` per request refused for breaking a rule).
    """

    api_prefix = ""  # what api_base adds to the server root
    thread_name = "provider-emulator"

    def __init__(self, script: Script, *, secret: bytes | None = None) -> None:
        super().__init__(script)
        self._secret = secret or secrets.token_bytes(32)
        self.requests: list[dict[str, Any]] = []
        self.request_paths: list[str] = []
        self.request_headers: list[dict[str, str]] = []
        self.rejections: list[tuple[str, str]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("_BoundHandler", (_Handler,), {"emulator": self})

    @property
    def api_base(self) -> str:
        """What to give litellm as ``api_base``."""
        return self.url + self.api_prefix

    def reset(self) -> None:
        """Forget the records (requests, rejections); the script position is kept."""
        with self._lock:
            self.requests.clear()
            self.request_paths.clear()
            self.request_headers.clear()
            self.rejections.clear()

    def load(self, script: Script) -> None:
        """Replace the script (a module-scoped emulator serving several tests)."""
        with self._lock:
            self._callable, self._items = split_script(script)
            self._next = 0

    # --- signing: opaque tokens the emulator can verify when they come back --------------

    def sign(self, purpose: str, text: str) -> str:
        """An opaque token binding ``text`` to this emulator (HMAC-SHA256 with its secret)."""
        mac = hmac.new(self._secret, f"{purpose}\0{text}".encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode()

    def verify(self, purpose: str, text: str, token: object) -> bool:
        """Whether ``token`` is :meth:`sign`'s token for this exact ``text``."""
        return isinstance(token, str) and hmac.compare_digest(self.sign(purpose, text), token)

    # --- hooks a provider implements ------------------------------------------------------

    def endpoint(self, request: Request) -> str | None:
        """The name of the endpoint ``request.path`` addresses, or None (404)."""
        raise NotImplementedError

    def check(self, endpoint: str, request: Request) -> None:
        """Raise :class:`Rejected` when the request breaks a documented rule."""
        raise NotImplementedError

    def answer(self, endpoint: str, request: Request, item: ScriptItem) -> Reply:
        """The native answer (JSON or SSE) to ``item``."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's native error body."""
        raise NotImplementedError

    # --- request handling ----------------------------------------------------------------

    def _record(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> int:
        with self._lock:
            self.requests.append(body)
            self.request_paths.append(path)
            self.request_headers.append(headers)
            return len(self.requests) - 1

    def _pick(self, body: dict[str, Any]) -> ScriptItem | None:
        with self._lock:
            callable_script = self._callable
            if callable_script is None:
                if self._next >= len(self._items):
                    return None
                self._next += 1
                return self._items[self._next - 1]
        return callable_script(body)  # outside the lock: it may be slow

    def handle(self, request: Request) -> Reply:
        """Route, check, pick a script item and answer; errors in the native format."""
        endpoint = self.endpoint(request)
        if endpoint is None:
            return Reply(404, self.error_body(404, f"no route POST {request.path}"))
        try:
            self.check(endpoint, request)
        except Rejected as rejection:
            with self._lock:
                self.rejections.append((rejection.rule, rejection.message))
            payload = self.error_body(rejection.status, rejection.message)
            payload["error"].update(rejection.fields)
            return Reply(rejection.status, payload)
        try:
            item = self._pick(request.body)
        except Exception as exc:  # a broken test script must surface, not hang
            return Reply(500, self.error_body(500, f"script callable raised {type(exc).__name__}: {exc}"))
        if item is None:
            return Reply(500, self.error_body(500, f"script exhausted after {request.index} requests"))
        if item.get("delay_s"):
            time.sleep(float(item["delay_s"]))
        if item.get("status") and int(item["status"]) >= 300:
            status = int(item["status"])
            payload = item.get("body")
            if payload is None:
                payload = self.error_body(status, f"scripted error {status}")
            return Reply(status, payload, headers=dict(item.get("headers") or {}))
        return self.answer(endpoint, request, item)


class _Handler(LoopbackHandler):
    emulator: ProviderEmulator

    def do_POST(self) -> None:
        raw = self.read_body()
        url = urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send(Reply(400, self.emulator.error_body(400, f"request body is not JSON: {exc}")))
            return
        index = self.emulator._record(url.path, body, headers)
        self._send(self.emulator.handle(Request(index, url.path, url.query, body, headers)))

    def _send(self, reply: Reply) -> None:
        if reply.events is None:
            data = reply.payload if isinstance(reply.payload, str) else json.dumps(reply.payload)
            self.send_bytes(reply.status, data.encode(), "application/json", reply.headers)
        else:
            self.send_events(reply.status, _sse(reply.events))


def _sse(events: list[tuple[str | None, Any]]) -> Iterator[bytes]:
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        prefix = f"event: {name}\n" if name else ""
        yield f"{prefix}data: {text}\n\n".encode()


def estimate_tokens(value: object) -> int:
    """A rough token count (characters / 4, at least 1) for default usage figures."""
    return max(1, len(value if isinstance(value, str) else json.dumps(value)) // 4)


def thinking_text(item: ScriptItem) -> str:
    """The item's thinking, or the default when it has none."""
    return str(item.get("thinking") or DEFAULT_THINKING)


def post_json(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST ``body`` raw (no client library in between) and return (status, decoded JSON body)."""
    response = httpx.post(url, json=body, headers=headers or {}, timeout=10)
    return response.status_code, response.json()
