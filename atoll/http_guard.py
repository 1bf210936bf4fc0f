"""Guards every service's HTTP app shares: Host allow-list, cross-site refusal, tokens beyond
loopback, and timeouts that drop idle slow clients (DESIGN §8: "the control plane checks the
Host header and needs a token when bound beyond loopback").

- **Host** (DNS rebinding: a page on ``evil.example`` re-resolves its name to 127.0.0.1 and
  its scripts reach the service with ``Host: evil.example``): a request is answered only
  when its Host is ``localhost``, an IP literal (rebinding needs a name the attacker owns;
  a client that reaches the service by address is not a rebound page), the bind name, or a
  name in ``ATOLL_ALLOWED_HOSTS`` (``name``, ``.suffix`` for a domain and its subdomains,
  or ``*``); anything else is 421.
- **Cross-site** (a page that posts a form or a multipart upload needs no CORS preflight):
  an unsafe method (POST, PUT, PATCH, DELETE) carrying ``Sec-Fetch-Site`` other than
  ``same-origin``/``none``, or an ``Origin`` whose host and port are not the Host's, is 403.
  Programs (httpx, curl, the orchestrator) send neither header.
- **Tokens**: :func:`check_bind` refuses to serve a non-loopback address without a token,
  and a token that is set but empty is a configuration error, never "no auth"
  (:func:`atoll.settings.require_non_empty`, in every settings class).
- **Slow clients**: :class:`GuardedHttpProtocol` closes a connection whose request headers
  have not all arrived ``header_timeout_s`` after it opened (or after its previous response);
  the middleware answers 408 when the app waits longer than ``body_timeout_s`` for the next
  piece of a request body.
- **Big bodies**: with ``max_body_bytes``, a request whose ``Content-Length`` is larger is
  answered 413 ``too_large`` before the app runs, and one that sends more (chunked, or lying
  about its length) is answered 413 as soon as the bytes received pass the limit: the app
  sees the request end there and its own answer is dropped.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from atoll.errors import AtollError, ErrorCode, http_status
from atoll.http import error_bytes
from atoll.settings import HostSettings

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
#: Starlette's TestClient sends ``Host: testserver``: a single-label name, which no one on the
#: internet can make a browser resolve (rebinding needs a name the attacker's DNS answers).
_IN_PROCESS_NAMES = frozenset({"testserver"})
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SAME_SITE = frozenset({"same-origin", "none"})


def parse_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (the form of ``ATOLL_ALLOWED_HOSTS`` and friends)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, variable: str) -> None:
    """Refuse (AtollError ``insecure_bind``) to serve ``host`` beyond loopback without a token."""
    if not is_loopback(host) and not token:
        raise AtollError(
            ErrorCode.insecure_bind,
            f"refusing to serve on {host} without a token: set {variable} (or bind 127.0.0.1)",
        )


def _host_name(header: str) -> str:
    """The host of a Host header value (``[::1]:8080`` -> ``::1``, ``a.b:80`` -> ``a.b``)."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostPolicy:
    """Which Host header names a service answers (see the module docstring)."""

    def __init__(self, allowed: Iterable[str] = (), bind_host: str | None = None) -> None:
        self.names = {name.lower().rstrip(".") for name in allowed if not name.startswith(".")}
        self.suffixes = tuple(name.lower().rstrip(".") for name in allowed if name.startswith("."))
        self.any = "*" in self.names
        if bind_host:
            self.names.add(bind_host.strip("[]").lower())

    def allows(self, header: str | None) -> bool:
        if self.any:
            return True
        if not header:
            return False
        name = _host_name(header).rstrip(".")
        if name in LOOPBACK_NAMES or name in _IN_PROCESS_NAMES or name in self.names:
            return True
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            pass
        return any(name == suffix[1:] or name.endswith(suffix) for suffix in self.suffixes)


class GuardMiddleware:
    """ASGI middleware applying the Host policy, the cross-site rule and the body timeout."""

    def __init__(
        self,
        app: ASGIApp,
        policy: HostPolicy,
        *,
        body_timeout_s: float | None = 30.0,
        max_body_bytes: int | None = None,
        detail_field: bool = False,
    ) -> None:
        self.app = app
        self.policy = policy
        #: Host header -> the policy's verdict (a policy never changes; a few names per service)
        self._host_verdicts: dict[str | None, bool] = {}
        self.body_timeout_s = body_timeout_s
        self.max_body_bytes = max_body_bytes
        # Refusals in atoll's one error body (atoll.http.ErrorBody), plus FastAPI's
        # ``"detail": text`` beside it where Archipelago's clients are served (the environment).
        self.detail_field = detail_field

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # The three headers read here, each as its last copy (as a dict of all of them keeps it).
        host = origin = fetch_site = length = None
        for name, value in scope.get("headers", ()):
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                fetch_site = value
            elif name == b"content-length":
                length = value
        if host is not None:
            host = host.decode("latin-1")
        if not self._host_allowed(host):
            await self._reply(
                send,
                ErrorCode.host_not_allowed,
                f"Host {host!r} is not served here; add it to ATOLL_ALLOWED_HOSTS if it should be",
            )
            return
        if (
            scope["type"] == "http"
            and scope.get("method") in _UNSAFE_METHODS
            and (origin is not None or fetch_site is not None)
            and _cross_site(
                None if fetch_site is None else fetch_site.decode("latin-1"),
                None if origin is None else origin.decode("latin-1"),
                host,
            )
        ):
            await self._reply(
                send,
                ErrorCode.cross_site,
                "cross-site request refused (Origin / Sec-Fetch-Site of another site)",
            )
            return
        if scope["type"] != "http" or not (self.body_timeout_s or self.max_body_bytes):
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        if limit is not None and length is not None and length.isdigit() and int(length) > limit:
            # Refused before a byte of it is read (uvicorn's parsers reject a malformed length).
            await self._reply(send, ErrorCode.too_large, _too_large(limit, length.decode("latin-1")))
            return
        await self._guarded_body(scope, receive, send)

    def _host_allowed(self, host: str | None) -> bool:
        verdict = self._host_verdicts.get(host)
        if verdict is None:
            verdict = self.policy.allows(host)
            if len(self._host_verdicts) >= 256:  # many names: start over rather than grow
                self._host_verdicts.clear()
            self._host_verdicts[host] = verdict
        return verdict

    async def _reply(self, send: Send, code: str, message: str) -> None:
        status = http_status(code, refusal=True)
        await _reply(send, status, error_bytes(code, message, detail_field=self.detail_field))

    async def _guarded_body(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 408 when the client takes longer than ``body_timeout_s`` to send the next
        piece of the body the app waits for, and 413 once the body received passes
        ``max_body_bytes``; either way the request ends for the app as a disconnect."""
        started = dropped = body_complete = False
        timeout = self.body_timeout_s or None  # None: anyio waits for ever
        limit = self.max_body_bytes
        received = 0

        async def refuse(code: str, message: str) -> Message:
            nonlocal dropped
            if not started and not dropped:
                dropped = True
                await self._reply(send, code, message)
            return {"type": "http.disconnect"}

        async def timed_receive() -> Message:
            nonlocal body_complete, received
            if dropped:  # refused: the rest of the body is never handed to the app
                return {"type": "http.disconnect"}
            if body_complete:  # later receives wait for a disconnect, as long as a response runs
                return await receive()
            with anyio.move_on_after(timeout):
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    body_complete = True
                received += len(message.get("body", b""))
                if limit is not None and received > limit:
                    return await refuse(ErrorCode.too_large, _too_large(limit, None))
                return message
            return await refuse(ErrorCode.body_timeout, f"request body stalled for more than {timeout:g} s")

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if dropped:
                return  # the 408 or 413 went out; the app's own answer has nowhere to go
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, timed_receive, tracking_send)


def _too_large(limit: int, declared: str | None) -> str:
    size = f"of {declared} bytes " if declared else ""
    return f"request body {size}is larger than this service's limit of {limit} bytes"


def _cross_site(fetch_site: str | None, origin: str | None, host: str | None) -> bool:
    if fetch_site is not None and fetch_site.lower() not in _SAME_SITE:
        return True
    if origin is None:
        return False
    if origin == "null":  # sandboxed frames, file:// pages, some redirects
        return True
    parts = urlsplit(origin)
    return not host or parts.netloc.lower() != host.strip().lower()


async def _reply(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol that drops a client whose request headers do not arrive
    within ``header_timeout_s`` (uvicorn itself waits for ever; a slowloris holds a socket
    per connection). Use :func:`guarded_protocol` to set the timeout."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers get the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(header_timeout_s: float) -> type[GuardedHttpProtocol]:
    """A :class:`GuardedHttpProtocol` subclass with this header timeout (uvicorn's ``http=``)."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"header_timeout_s": header_timeout_s})


def guard(
    app: Any,
    *,
    bind_host: str | None = None,
    body_timeout_s: float | None = 30.0,
    max_body_bytes: int | None = None,
) -> None:
    """Add :class:`GuardMiddleware` to a FastAPI/Starlette ``app``, with the Host names of
    ``$ATOLL_ALLOWED_HOSTS`` (how the agents runner, grader and orchestrator use it) and, with
    ``max_body_bytes``, the 413 of a bigger request body."""
    policy = HostPolicy(parse_list(HostSettings().allowed_hosts), bind_host)
    app.add_middleware(
        GuardMiddleware, policy=policy, body_timeout_s=body_timeout_s, max_body_bytes=max_body_bytes
    )
