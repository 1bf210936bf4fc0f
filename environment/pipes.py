"""Feed an async byte stream to blocking code through an OS pipe (no spool file, one pass).

:func:`consume_piped` is how ``POST /data/populate`` extracts a raw archive body while it
arrives: the body goes through a pipe to the extraction thread; when extraction stops early
(a refused member), closing the pipe's read end makes the feeder stop too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, BinaryIO, TypeVar

import anyio

#: Bytes per write to the pipe (and the pipe's size where Linux allows): one thread hop per
#: MiB, not per network chunk.
PIPE_BATCH = 1 << 20

T = TypeVar("T")


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


async def consume_piped(
    chunks: AsyncIterable[bytes],
    consume: Callable[[BinaryIO], Awaitable[T]],
    run_blocking: Callable[..., Awaitable[Any]],
) -> T:
    """``await consume(reader)`` while ``chunks`` are written to the pipe ``reader`` reads.

    ``run_blocking(function, *args)`` runs the pipe writes off the event loop (a pool of the
    caller's choice). ``consume``'s result is returned and its error raised as is (not in an
    exception group); a feeder that finds the read end closed stops quietly.
    """
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):  # a bigger pipe means fewer wake-ups (Linux only)
        fcntl.fcntl(write_fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BATCH)
    reader = os.fdopen(read_fd, "rb", buffering=PIPE_BATCH)

    async def feed() -> None:
        try:
            batch: list[bytes] = []
            size = 0
            async for chunk in chunks:
                batch.append(chunk)
                size += len(chunk)
                if size >= PIPE_BATCH:
                    await run_blocking(_write_all, write_fd, b"".join(batch))
                    batch, size = [], 0
            if batch:
                await run_blocking(_write_all, write_fd, b"".join(batch))
        except OSError:
            pass  # the consumer ended first (broken pipe); its result or error is the answer
        finally:
            os.close(write_fd)

    result: T | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(feed)
        try:
            result = await consume(reader)
        except Exception as exc:  # re-raised below, outside the task group (no exception group)
            failure = exc
        finally:
            reader.close()
    if failure is not None:
        raise failure
    return result  # type: ignore[return-value]
