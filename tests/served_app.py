"""An ASGI app served by uvicorn on a free loopback port from a thread, for tests that need
real HTTP (the services as clients reach them)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class ServedApp:
    """An ASGI app served by uvicorn on 127.0.0.1 (free port) from a thread."""

    def __init__(self, app: Any) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> ServedApp:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
