"""Run inside the environment container (`docker-compose exec -T environment python -`) by
tests/deploy/container_test.sh: the real code server, with the container's own security
settings, runs three commands under its sandbox — Python prints 6*7, the world's files are
listed, and app data (next to the world, readable by the service) stays out of reach — and
the running service's /health must report the sandbox available.
Not a pytest module; it prints one line per check and exits non-zero on the first failure."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
import uuid
from pathlib import Path

from fastmcp import Client

from mcp_servers import create_server

FS_ROOT = Path(os.environ.get("ATOLL_FS_ROOT", "/filesystem"))
APPS_ROOT = Path(os.environ.get("ATOLL_APPS_DATA_ROOT", "/.apps_data"))


def fail(message: str) -> None:
    print(f"code_exec check: FAILED: {message}", flush=True)
    sys.exit(1)


def health_report() -> dict:
    """What the running environment service says about its sandbox (GET /health)."""
    with urllib.request.urlopen("http://127.0.0.1:8080/health", timeout=10) as response:
        return json.load(response).get("code_sandbox") or {}


async def main() -> None:
    marker = f"ci-marker-{uuid.uuid4().hex[:8]}.txt"
    canary = f"APPS-DATA-CANARY-{uuid.uuid4().hex}"
    (FS_ROOT / marker).write_text("hello from the world\n")
    (APPS_ROOT / "ci-canary.txt").write_text(canary + "\n")
    server = create_server(
        "code",
        fs_root=str(FS_ROOT),
        apps_data_root=str(APPS_ROOT),
        mode="individual",
        options={"timeout_s": 60},
    )
    try:
        async with Client(server) as client:

            async def run(command: str) -> dict:
                result = await client.call_tool("code_exec", {"code": command}, raise_on_error=False)
                if result.is_error:
                    fail(f"{command!r}: tool error: {result.structured_content or result.content}")
                return result.structured_content

            answer = await run("python3 -c 'print(6*7)'")
            if answer.get("exit_code") != 0 or answer.get("output", "").strip() != "42":
                fail(f"print(6*7): {answer}")
            print(f"code_exec check: python3 printed 42 (sandbox: {answer.get('sandbox', '?')})", flush=True)

            listing = await run("ls /filesystem")
            if listing.get("exit_code") != 0 or marker not in listing.get("output", ""):
                fail(f"ls /filesystem does not show {marker}: {listing}")
            print("code_exec check: ls /filesystem lists the world's files", flush=True)

            for path in (APPS_ROOT / "ci-canary.txt", Path("/.apps_data/ci-canary.txt")):
                stolen = await run(f"cat {path}")
                if stolen.get("exit_code") == 0 or canary in stolen.get("output", ""):
                    fail(f"app data readable from the sandbox at {path}: {stolen}")
            print("code_exec check: app data is not readable from the sandbox", flush=True)
    finally:
        (FS_ROOT / marker).unlink(missing_ok=True)
        (APPS_ROOT / "ci-canary.txt").unlink(missing_ok=True)
    report = health_report()
    if report.get("available") is not True:
        fail(f"the environment's /health says the sandbox is not available: {report}")
    print(f"code_exec check: /health reports the sandbox: {report}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
