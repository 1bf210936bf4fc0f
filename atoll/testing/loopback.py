"""The loopback HTTP plumbing every scripted test server shares (``ScriptedLLM`` in
:mod:`atoll.testing.scripted_llm`, the provider emulators of tests/providers/): a quiet threading
server on 127.0.0.1 at a free port, the context manager that runs it with its script, and the
request handler base that reads bodies and answers JSON or Server-Sent Events."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

ScriptItem = dict[str, Any]
Script = Iterable[ScriptItem] | Callable[[dict[str, Any]], ScriptItem]


class LoopbackService:
    """What every scripted test server shares: a context manager serving :meth:`handler` on
    127.0.0.1 at a free port from a daemon thread (:func:`serve_on_loopback`), and its script
    (a list consumed in order, or a callable; see :func:`split_script`)."""

    thread_name = "loopback-service"

    def __init__(self, script: Script) -> None:
        self._callable, self._items = split_script(script)
        self._lock = threading.Lock()
        self._next = 0
        self._server: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server."""
        raise NotImplementedError

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        self._server, self._thread = serve_on_loopback(self.handler(), self.thread_name)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def split_script(script: Script) -> tuple[Callable[[dict[str, Any]], ScriptItem] | None, list[ScriptItem]]:
    """``(callable, [])`` for a callable script, ``(None, items)`` for an iterable one."""
    if callable(script):
        return script, []
    return None, list(script)


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that keeps quiet about clients hanging up mid-answer."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, cancelled run) closes the socket mid-answer; that is
        # the test's business, not an error worth a traceback on stderr.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve_on_loopback(
    handler: type[BaseHTTPRequestHandler], thread_name: str
) -> tuple[LoopbackHTTPServer, threading.Thread]:
    """Bind ``handler`` on 127.0.0.1 at a free port and serve it from a started daemon thread.

    Stop it with ``server.shutdown(); server.server_close(); thread.join()``.
    """
    server = LoopbackHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name=thread_name, daemon=True)
    thread.start()
    return server, thread


class LoopbackHandler(BaseHTTPRequestHandler):
    """What the scripted servers' request handlers share: HTTP/1.1, quiet logs, the raw request
    body, and JSON and Server-Sent Events answers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def read_body(self) -> bytes:
        """The request body (Content-Length bytes; empty without one)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_bytes(self, status: int, data: bytes, content_type: str, headers: dict[str, str]) -> None:
        """Answer ``status`` with ``data`` and ``headers`` (after Content-Type and -Length)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, status: int, chunks: Iterable[bytes]) -> None:
        """Answer ``status`` as an event stream of the encoded ``chunks``, then close the connection."""
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
        self.wfile.flush()
        self.close_connection = True
