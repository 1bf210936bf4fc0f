"""A TCP proxy in front of PostgreSQL that a test controls: cut the database off (every
connection dropped, new ones refused) and bring it back, or drop the open connections."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class DatabaseProxy:
    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._refusing = False
        self._closed = False
        self.dropped = 0  # connections this proxy cut
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def cut(self) -> None:
        """The database is gone: open connections drop, new ones are closed at once."""
        with self._lock:
            self._refusing = True
        self.drop_connections()

    def restore(self) -> None:
        with self._lock:
            self._refusing = False

    def drop_connections(self) -> int:
        """Terminate every open connection (as a server restart or failover would)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        self.dropped += len(pairs)
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.drop_connections()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        try:
            selector.register(client, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, client)
            while True:
                for key, _ in selector.select(timeout=1.0):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()
