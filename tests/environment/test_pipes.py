"""environment.pipes: an async byte stream read by blocking code through a pipe."""

from __future__ import annotations

import anyio
import pytest

from environment.pipes import PIPE_BATCH, consume_piped


async def _run_blocking(function, *args):
    return await anyio.to_thread.run_sync(function, *args)


async def _chunks(count: int, size: int = 64 * 1024):
    for index in range(count):
        yield bytes([index % 256]) * size


def test_the_consumer_reads_every_byte_in_order():
    async def main() -> bytes:
        return await consume_piped(
            _chunks(40), lambda reader: anyio.to_thread.run_sync(reader.read), _run_blocking
        )

    data = anyio.run(main)
    assert len(data) == 40 * 64 * 1024 > PIPE_BATCH
    assert data == b"".join(bytes([index]) * 64 * 1024 for index in range(40))


def test_a_consumer_that_stops_early_stops_the_feeder_and_its_error_is_raised_as_is():
    fed = 0

    async def endless():
        nonlocal fed
        while True:  # a body that never ends: only the closed read end stops the feeder
            fed += 1
            yield b"x" * 65536

    async def refuse(reader) -> None:
        await anyio.to_thread.run_sync(reader.read, 1000)
        raise ValueError("refused member")

    async def main() -> None:
        with anyio.fail_after(60):
            await consume_piped(endless(), refuse, _run_blocking)

    with pytest.raises(ValueError, match="refused member"):
        anyio.run(main)
    assert fed > 0
