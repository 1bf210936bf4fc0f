"""The official MCP TypeScript SDK client (``@modelcontextprotocol/sdk``) against every tool.

``ts/client.mjs`` lists the tools, compiles every input and output schema with AJV in strict
mode, and calls the sample calls through ``Client.callTool``, which validates each result's
structured content against the tool's outputSchema (error results included). Its packages are
installed from the committed lockfile by ``scripts/setup.sh --dev`` (``npm ci``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from atoll import __version__
from mcp_servers import SERVER_NAMES, get_definition
from tests.mcp_clients.conftest import sample_calls

CLIENT_DIR = Path(__file__).parent / "ts"


def _node() -> str:
    node = shutil.which("node")
    assert node, "node (>= 20) is needed for the TypeScript SDK test"
    assert (CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
        f"TypeScript SDK not installed: run scripts/setup.sh --dev (npm ci in {CLIENT_DIR})"
    )
    return node


def test_typescript_sdk_lists_and_calls_tools_with_strict_ajv(all_apps_env, tmp_path: Path):
    calls = sample_calls()
    calls_file = tmp_path / "calls.json"
    calls_file.write_text(json.dumps(calls))
    answered = dict(all_apps_env.app.state.plane.fast_path.answered)
    run = subprocess.run(
        [_node(), str(CLIENT_DIR / "client.mjs"), all_apps_env.mcp_url, str(calls_file)],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    tools = sum(len(get_definition(name).tools) for name in SERVER_NAMES) + 2 * len(SERVER_NAMES)
    assert report["server"] == {"name": "atoll-environment", "version": __version__}
    assert report["tools"] == tools and report["compiled"] == 2 * tools
    assert [c["name"] for c in report["calls"]] == [c["name"] for c in calls]
    errors = [c for c in report["calls"] if c["is_error"]]
    assert errors and all(c["structured_keys"] == ["error"] for c in errors)
    # the lean /mcp path served the listing and the calls (environment/mcp_fast.py)
    served = all_apps_env.app.state.plane.fast_path.answered
    assert served["tools/list"] > answered["tools/list"]
    assert served["tools/call"] - answered["tools/call"] == len(calls)
