"""Running a probe in a fresh interpreter (nothing imported yet) and reading what it reports.

Start-up and import tests cannot run in the test process, which has imported everything
already. A probe prints one JSON object as its last line of output; :func:`run_fresh` returns it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Runs ``atoll`` with the arguments given as JSON in argv[1]; reports the exit code and which
#: of the modules in ``%(watch)r`` were imported.
CLI_PROBE = """
import json, sys
sys.argv = ["atoll", *json.loads(sys.argv[1])]
from atoll_cli.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "imported": sorted(m for m in %(watch)r if m in sys.modules)}))
"""


def run_fresh(
    code: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None, check: bool = True
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run ``python -c code *args`` from the repository root with this checkout importable;
    the JSON object it printed last, and the completed process. ``check``: fail the test
    (with the probe's stderr) when it exits non-zero."""
    completed = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.strip().splitlines()
    assert lines, f"the probe printed nothing: {completed.stderr[-3000:]}"
    return json.loads(lines[-1]), completed


def run_cli(args: list[str], watch: tuple[str, ...], *, timeout: float = 300) -> dict[str, Any]:
    """``atoll ARGS`` in a fresh interpreter: its exit code, the watched modules it imported,
    and its stdout/stderr."""
    report, completed = run_fresh(
        CLI_PROBE % {"watch": watch}, json.dumps(args), timeout=timeout, check=False
    )
    return {**report, "stdout": completed.stdout, "stderr": completed.stderr}
