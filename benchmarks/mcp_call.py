"""Environment CPU per ``tools/call`` through ``/mcp``, with the ASGI app driven in-process.

No sockets, no uvicorn, no client: each call is one hand-built ASGI request (a 2026-07-28
``tools/call`` of ``filesystem_list_files``, as fastmcp's ``Client`` sends it) into the
environment's app, so the figure is the app's own CPU (``time.process_time``) per call: the
guard, the lean path, the gateway, the tool and its result. ``--profile`` prints the top of a
``cProfile`` of the same loop. Compare two checkouts in the same minutes with ``--tree``: the
script reruns itself on that tree's code, alternating rounds (run it with PYTHONPATH set to
the checkout under test).

    python benchmarks/mcp_call.py [--calls 2000] [--rounds 5] [--tree DIR] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This folder holds environment.py, which would shadow the package; the code measured is the
# one on PYTHONPATH (or the installed one).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

MODERN = "2026-07-28"
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
TOOL, ARGUMENTS = "filesystem_list_files", {"path": "/Reports"}


def _request(call_id: int) -> tuple[dict[str, Any], bytes]:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": ARGUMENTS, "_meta": _ENVELOPE},
        }
    ).encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", TOOL.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "state": {},
    }
    return scope, body


async def _call(app: Any, call_id: int) -> bytes:
    scope, body = _request(call_id)
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the response completes first
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    return b"".join(m.get("body", b"") for m in sent[1:])


async def _rounds(calls: int, rounds: int, profile: bool) -> list[float]:
    import httpx

    from environment.app import create_app
    from environment.settings import EnvironmentSettings

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "filesystem" / "Reports").mkdir(parents=True)
        (root / "filesystem" / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M\n")
        settings = EnvironmentSettings(
            fs_root=root / "filesystem",
            apps_data_root=root / ".apps_data",
            log_level="WARNING",
            json_logs=False,
            preload_servers=False,
        )
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
                config = {"mcpServers": {"filesystem": {"transport": "inprocess", "server": "filesystem"}}}
                reply = await http.post("/apps", json=config)
                assert reply.status_code == 200, reply.text
            first = json.loads(await _call(app, 0))
            assert first["result"]["structuredContent"], first
            for i in range(200):  # warm caches
                await _call(app, i)
            per_call = []
            profiler = cProfile.Profile() if profile else None
            for _ in range(rounds):
                if profiler is not None:
                    profiler.enable()
                started = time.process_time()
                for i in range(calls):
                    await _call(app, i)
                per_call.append((time.process_time() - started) / calls)
                if profiler is not None:
                    profiler.disable()
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(35)
            return per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="also run this checkout's code, alternating")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once or args.profile:
        per_call = asyncio.run(_rounds(args.calls, args.rounds, args.profile))
        print(json.dumps(per_call))
        return
    trees = {"this": os.environ.get("PYTHONPATH", ""), "tree": str(args.tree)} if args.tree else None
    labels = list(trees or {"this": ""})
    results: dict[str, list[float]] = {label: [] for label in labels}
    for _ in range(args.rounds):
        for label in labels:
            env = dict(os.environ)
            if trees is not None:
                env["PYTHONPATH"] = trees[label]
            out = subprocess.run(
                [sys.executable, __file__, "--once", "--calls", str(args.calls), "--rounds", "1"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[label] += json.loads(out.strip().splitlines()[-1])
    load = os.getloadavg()[0]
    for label in labels:
        values = sorted(results[label])
        print(
            f"{label:5}: best {values[0] * 1e6:6.0f} us/call, median {values[len(values) // 2] * 1e6:6.0f} us"
            f" ({len(values)} rounds x {args.calls} calls; load {load:.1f})"
        )
    if trees is not None:
        ratios = sorted(a / b for a, b in zip(results["this"], results["tree"], strict=True))
        print(
            f"this / tree, per round: median {ratios[len(ratios) // 2]:.2f} (range {ratios[0]:.2f}-{ratios[-1]:.2f})"
        )


if __name__ == "__main__":
    main()
