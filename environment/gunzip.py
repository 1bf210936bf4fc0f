"""Gzip decompression on its own thread, so that populate uses two cores as `tar xzf` does
(tar and gzip run as two processes). zlib releases the GIL while it inflates."""

from __future__ import annotations

import queue
import threading
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import SupportsRead

_READ_SIZE = 1 << 20
_QUEUE_DEPTH = 8  # at most ~8 decompressed chunks in memory


class ForwardOnly:
    """``tell``/``seek`` for a reader that can only move forward (a seek reads and discards).

    Enough for :mod:`tarfile`, which seeks forward over member data it does not extract.
    Subclasses keep ``_position`` (bytes returned by ``read``) up to date.
    """

    _position: int

    def read(self, size: int = -1) -> bytes:
        raise NotImplementedError

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._position + offset
        if whence not in (0, 1) or target < self._position:
            raise OSError(f"{type(self).__name__} can only seek forward")
        while self._position < target and self.read(min(target - self._position, _READ_SIZE)):
            pass
        return self._position

    def seekable(self) -> bool:
        return False


class ThreadedGunzip(ForwardOnly):
    """A forward-only binary reader of the decompressed content of a gzip stream.

    ``read``/``tell``/forward ``seek`` are enough for :mod:`tarfile`. Multi-member gzip files
    are supported. A corrupt or truncated stream raises ``zlib.error``/``EOFError`` from
    ``read``. ``compressed_bytes`` is how much of ``raw`` has been consumed so far.
    """

    def __init__(self, raw: SupportsRead[bytes]) -> None:
        self.raw = raw
        self.compressed_bytes = 0
        self._chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(_QUEUE_DEPTH)
        self._buffer = memoryview(b"")
        self._position = 0
        self._finished = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._inflate, name="atoll-gunzip", daemon=True)
        self._thread.start()

    def _put(self, item: bytes | BaseException | None) -> bool:
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _inflate(self) -> None:
        try:
            inflater: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while data := self.raw.read(_READ_SIZE):
                self.compressed_bytes += len(data)
                while data:
                    if inflater is None:  # between gzip members: another may follow, or padding
                        data = data.lstrip(b"\x00")
                        if not data:
                            break
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    # Bounded output per step: a bomb cannot balloon memory before it is caught.
                    output = inflater.decompress(data, _READ_SIZE)
                    if output and not self._put(output):
                        return
                    if inflater.eof:
                        data, inflater = inflater.unused_data, None
                    else:
                        data = inflater.unconsumed_tail
            if inflater is not None:
                # Flush what the last input still holds, then insist on a complete stream.
                while not inflater.eof and (output := inflater.decompress(b"", _READ_SIZE)):
                    if not self._put(output):
                        return
                if not inflater.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
            self._put(None)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(exc)

    def read(self, size: int = -1) -> bytes:
        parts: list[bytes] = []
        wanted = size if size >= 0 else 1 << 62
        while wanted > 0:
            if not self._buffer:
                if self._finished:
                    break
                item = self._chunks.get()
                if item is None:
                    self._finished = True
                    break
                if isinstance(item, BaseException):
                    self._finished = True
                    raise item
                self._buffer = memoryview(item)
            piece = self._buffer[:wanted]
            self._buffer = self._buffer[len(piece) :]
            parts.append(piece.tobytes())
            wanted -= len(piece)
        data = b"".join(parts)
        self._position += len(data)
        return data

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> ThreadedGunzip:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
