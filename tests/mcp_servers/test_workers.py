"""The worker threads that run sync tool bodies (mcp_servers/_core/workers.py): a cancelled call
still waits for its body, threads are bounded, context and exceptions carry over; and through
the gateway, a cancelled call stays in flight until its body has returned."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from environment.config import AppsConfig
from environment.gateway import Gateway, GatewayTool
from mcp_servers._core import ServerContext, ServerDefinition
from mcp_servers._core.build import build_server, direct_tools
from mcp_servers._core.workers import MAX_THREADS, run_sync

_REQUEST = contextvars.ContextVar("request", default="none")


class _Held:
    """A body that blocks until released, and records when it returned."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.returned_at: float | None = None

    def __call__(self) -> str:
        self.started.set()
        assert self.release.wait(10)
        time.sleep(0.05)  # still running a little after being released
        self.returned_at = time.monotonic()
        return "done"


async def _release_when_started(held: _Held, then: object = None) -> None:
    await anyio.to_thread.run_sync(held.started.wait, 10)
    if callable(then):
        then()
    held.release.set()


def test_a_cancel_scope_waits_for_the_body_before_the_call_ends() -> None:
    held = _Held()

    async def main() -> tuple[bool, float]:
        async with anyio.create_task_group() as tasks:
            with anyio.CancelScope() as scope:
                tasks.start_soon(_release_when_started, held, scope.cancel)
                await run_sync(held)
            ended = time.monotonic()
        return scope.cancelled_caught, ended

    cancelled, ended = asyncio.run(main())
    assert cancelled  # the cancellation did reach the caller...
    assert held.returned_at is not None and held.returned_at <= ended  # ...once the body had returned


def test_task_cancel_and_a_timeout_wait_for_the_body_too() -> None:
    async def cancelled_task() -> float:
        held = _Held()
        task = asyncio.ensure_future(run_sync(held))
        await asyncio.to_thread(held.started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.02)
        task.cancel()  # a second cancel while it waits for the body changes nothing
        held.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert held.returned_at is not None
        return held.returned_at

    async def timed_out() -> None:
        held = _Held()
        threading.Timer(0.2, held.release.set).start()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run_sync(held), 0.05)
        assert held.returned_at is not None

    asyncio.run(cancelled_task())
    asyncio.run(timed_out())


def test_results_exceptions_and_context_carry_over() -> None:
    def body() -> str:
        seen = _REQUEST.get()
        _REQUEST.set("changed in the body")
        return seen

    def fails() -> None:
        raise KeyError("missing")

    def stops() -> None:
        raise StopIteration

    async def main() -> None:
        _REQUEST.set("call 7")
        assert await run_sync(body) == "call 7"
        assert _REQUEST.get() == "call 7"  # the body ran in a copy
        with pytest.raises(KeyError, match="missing"):
            await run_sync(fails)
        with pytest.raises(RuntimeError, match="StopIteration"):
            await run_sync(stops)

    asyncio.run(main())


def test_threads_are_bounded_and_extra_calls_queue() -> None:
    release = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    def body() -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10)
        with lock:
            running -= 1
        return 1

    async def main() -> int:
        calls = [asyncio.ensure_future(run_sync(body)) for _ in range(MAX_THREADS + 15)]
        await asyncio.sleep(0.3)
        release.set()
        return sum(await asyncio.gather(*calls))

    assert asyncio.run(main()) == MAX_THREADS + 15  # every call ran...
    assert most <= MAX_THREADS  # ...never more than the bound at once


def test_a_call_cancelled_before_its_body_started_never_runs_it() -> None:
    """A write queued behind a full pool and cancelled by its client must not happen later."""
    release = threading.Event()
    ran: list[str] = []

    async def main() -> float:
        blockers = [asyncio.ensure_future(run_sync(lambda: release.wait(10))) for _ in range(MAX_THREADS)]
        await asyncio.sleep(0.2)  # every thread is busy
        started = time.monotonic()
        with anyio.move_on_after(0.1) as scope:
            await run_sync(lambda: ran.append("queued, then cancelled"))
        cancelled_after = time.monotonic() - started
        assert scope.cancelled_caught
        release.set()
        await asyncio.gather(*blockers)
        await run_sync(lambda: ran.append("a later call"))  # the pool still serves
        return cancelled_after

    cancelled_after = asyncio.run(main())
    assert ran == ["a later call"]  # the dropped body never ran...
    assert cancelled_after < 2  # ...and its cancellation did not wait for the blockers


def test_the_exit_waits_for_a_body_still_running(tmp_path: Path) -> None:
    """The worker threads are daemons, but an interpreter leaving while a body writes lets it finish."""
    marker = tmp_path / "written"
    script = f"""
import asyncio, threading, time
from mcp_servers._core.workers import run_sync

started = threading.Event()

def body():
    started.set()
    time.sleep(0.5)
    open({str(marker)!r}, "w").write("done")

async def start():
    asyncio.ensure_future(run_sync(body))
    await asyncio.to_thread(started.wait, 10)

# The loop is closed with the call still pending (nothing awaits it, nothing cancels it), as
# when a server's shutdown gives up on a drain: only the exit is left to wait for the body.
loop = asyncio.new_event_loop()
loop.run_until_complete(start())
loop.close()
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, cwd=Path(__file__).parents[2])
    assert marker.read_text() == "done"


def test_a_cancelled_call_stays_in_flight_on_the_gateway_until_its_body_returns(tmp_path: Path) -> None:
    """What a hot swap's drain relies on: the gateway counts the call out only when its body is done."""
    held = _Held()
    definition = ServerDefinition(name="held", consolidated_name="held")

    @definition.tool(read_only=True)
    def hold(ctx: ServerContext) -> str:
        """Block until released."""
        return held()

    server = build_server(definition, ServerContext.create(tmp_path, tmp_path, {}))
    direct = direct_tools(server)["hold"]

    async def main() -> None:
        gateway = Gateway(AppsConfig())
        tool = GatewayTool.wrap(gateway, "held", direct, direct)
        in_flight_at_release = []

        def release() -> None:
            in_flight_at_release.append(gateway.in_flight)

        async with anyio.create_task_group() as tasks:
            with anyio.CancelScope() as scope:
                tasks.start_soon(_release_when_started, held, lambda: (scope.cancel(), release()))
                await tool.run({})
            assert scope.cancelled_caught
            assert held.returned_at is not None  # the body had returned...
            assert gateway.in_flight == 0  # ...before the call was counted out
        assert in_flight_at_release == [1]  # cancelled, but still counted while the body ran

    asyncio.run(main())
