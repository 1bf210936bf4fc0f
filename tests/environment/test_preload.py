"""The environment's warm-up builds every app server once, the optional ones included."""

from __future__ import annotations

from pathlib import Path

from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES
from tests.fresh_interpreter import run_fresh

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


def _run_probe(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (nothing imported yet) and read the JSON it prints last."""
    return run_fresh(code)[0]


def test_preload_builds_every_server_including_market_data() -> None:
    report = _run_probe(_PROBE)
    assert report["finished"] is True
    assert "market_data" in OPTIONAL_SERVER_NAMES
    assert report["servers"] == [*SERVER_NAMES, *OPTIONAL_SERVER_NAMES]
    assert report["market_data_imported"] is True


# The preload is held on its first server; a build for POST /apps starts meanwhile. It must
# wait for the preload (one import path) instead of importing the same modules beside it.
_WAIT_PROBE = """
import json, sys, tempfile, threading, time
from pathlib import Path
import mcp_servers
from environment import gateway, preload

gate = threading.Event()
log = []
real = mcp_servers.create_tools

def create_tools(name, **kwargs):
    if threading.current_thread().name == "preload" and not gate.is_set():
        gate.wait()
    log.append((threading.current_thread().name, name))
    return real(name, **kwargs)

mcp_servers.create_tools = create_tools
before = preload.wait_for_preload(0)  # no preload started: nothing to wait for
worker = threading.Thread(target=preload.preload_app_servers, name="preload")
worker.start()
while not preload._preloaded:
    time.sleep(0.01)
root = Path(tempfile.mkdtemp())
apps = threading.Thread(
    target=gateway._default_server_factory,
    args=("mail",),
    kwargs={"fs_root": root / "fs", "apps_data_root": root / "apps"},
    name="apps",
)
apps.start()
apps.join(1.0)
waited = apps.is_alive()
timed_out = preload.wait_for_preload(0.01)
gate.set()
worker.join()
apps.join()
print(json.dumps({"before": before, "waited": waited, "timed_out": timed_out, "log": log}))
"""


def test_apps_build_waits_for_a_running_preload() -> None:
    report = _run_probe(_WAIT_PROBE)
    assert report["before"] is True
    assert report["waited"] is True  # still blocked while the preload was held
    assert report["timed_out"] is False
    threads = [thread for thread, _ in report["log"]]
    # every preload build happened before the /apps build, none beside it
    assert threads[-1] == "apps" and "apps" not in threads[:-1]
    assert threads.count("preload") == len(SERVER_NAMES) + len(OPTIONAL_SERVER_NAMES)
