"""The environment's warm-up builds every app server once, the optional ones included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: the preload runs once per process, and this test's own process may
# already have imported some servers for other tests.
_PROBE = """
import json, sys
from environment.preload import app_servers_preloaded, preload_app_servers, preloaded_servers
preload_app_servers()
print(json.dumps({
    "finished": app_servers_preloaded(),
    "servers": list(preloaded_servers()),
    "market_data_imported": "mcp_servers.market_data.server" in sys.modules
        or "mcp_servers.market_data" in sys.modules,
}))
"""


def test_preload_builds_every_server_including_market_data() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["finished"] is True
    assert "market_data" in OPTIONAL_SERVER_NAMES
    assert report["servers"] == [*SERVER_NAMES, *OPTIONAL_SERVER_NAMES]
    assert report["market_data_imported"] is True
