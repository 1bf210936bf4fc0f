"""Serve an ASGI app in the foreground the same way for every `atoll … serve` command.

The socket is bound here, before uvicorn starts, so a port in use (or a host that cannot be
bound) is one AtollError line and exit status 2 instead of uvicorn's log record and exit 3;
and once uvicorn accepts connections one line says where: ``<service> listening on URL``.
Binding first also means ``port=0`` works (the line names the port the kernel chose).
It is also where every service's token rule is kept (DESIGN §8): a service is not served
beyond loopback without its token (:func:`atoll.http_guard.check_bind`).

    serve_app(app, service="viewer", host=host, port=port, token=token,
              token_variable="ATOLL_VIEW_TOKEN", log_level="warning")
"""

from __future__ import annotations

import errno
import socket
import sys
from typing import Any

import uvicorn

from atoll import telemetry
from atoll.errors import AtollError, ErrorCode
from atoll.http_guard import check_bind
from atoll.logs import UVICORN_LOGGERS, configure_logging


def bind_listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), or AtollError naming what stops it."""
    if not 0 <= port < 65536:
        raise AtollError(ErrorCode.bad_port, f"--port {port} must be between 1 and 65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise AtollError(ErrorCode.bad_host, f"--host {host!r} cannot be resolved: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    # As uvicorn does: a restarted service can bind a port whose old connections linger in
    # TIME_WAIT. A port some process is listening on still fails with EADDRINUSE.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AtollError(
                ErrorCode.port_in_use,
                f"port {port} on {host} is already in use; stop that process or pick --port",
            ) from None
        if exc.errno == errno.EACCES:
            raise AtollError(
                ErrorCode.port_denied, f"port {port} on {host} needs privileges; pick --port above 1023"
            ) from None
        raise AtollError(ErrorCode.bad_host, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _AnnouncingServer(uvicorn.Server):
    """uvicorn's server that prints the listening line once startup (lifespan included) is done."""

    def __init__(self, config: uvicorn.Config, service: str, url: str) -> None:
        super().__init__(config)
        self._announcement = f"{service} listening on {url}"

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(self._announcement, file=sys.stderr, flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets=sockets)
        # uvicorn re-raises a SIGTERM once shut down, which ends the process before exit
        # handlers run: buffered spans are exported here (atoll.telemetry; no-op when off).
        telemetry.shutdown()


def serve_app(
    app: Any,
    *,
    service: str,
    host: str,
    port: int,
    token: str | None = None,
    token_variable: str | None = None,
    json_logs: bool | None = None,
    **uvicorn_options: Any,
) -> None:
    """Serve ``app`` on host:port until interrupted (blocking).

    Beyond loopback the service must have a ``token`` (the bearer token its app checks; its
    setting is named by ``token_variable`` in the refusal): without one this raises AtollError
    ``insecure_bind`` before anything is bound.

    Logs go through :func:`atoll.logs.configure_logging`: readable on a terminal, JSON lines
    with ``json_logs`` or when stderr is not a terminal (uvicorn's own log config is not used).
    ``uvicorn_options`` go to :class:`uvicorn.Config` (log_level, http, lifespan…).
    Raises AtollError (``insecure_bind``, ``port_in_use``, ``port_denied``, ``bad_host``,
    ``bad_port``) before anything is served; exits with status 3, as uvicorn does, when the app's startup fails.
    """
    check_bind(host, token, token_variable or "a token")
    sock = bind_listening_socket(host, port)
    # uvicorn's loggers at the service's level (warning unless given: no startup chatter before
    # the listening line); atoll's own keep what the service set.
    configure_logging(
        str(uvicorn_options.get("log_level") or "warning"), json_logs=json_logs, loggers=UVICORN_LOGGERS
    )
    uvicorn_options["log_config"] = None
    config = uvicorn.Config(app, host=host, port=sock.getsockname()[1], **uvicorn_options)
    server = _AnnouncingServer(config, service, url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        sys.exit(3)
