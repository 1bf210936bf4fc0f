"""Running a snippet in a fresh Python process under an address-space cap, for its peak memory.

``run_measured(code)`` runs ``code`` (which sets ``outcome``) in a child with ``RLIMIT_AS`` at
``limit_mib`` (a regression fails with MemoryError instead of taking the machine) and returns
``{"seconds", "peak_mib", "outcome"}``: wall time and the growth of peak RSS over what the
child held after its imports (``ru_maxrss``), so imports do not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WRAPPER = """
import json, resource, sys, time
limit = {limit}
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
{imports}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
try:
{body}
except MemoryError:
    outcome = "MemoryError"
seconds = time.perf_counter() - began
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(json.dumps({{"seconds": seconds, "peak_mib": peak, "outcome": str(outcome)}}))
"""


def run_measured(imports: str, body: str, *, limit_mib: int = 2048, timeout: float = 120) -> dict:
    """Run ``imports`` (not measured) then ``body`` (must set ``outcome``) in a child process."""
    script = _WRAPPER.format(
        limit=limit_mib << 20,
        imports=textwrap.dedent(imports),
        body=textwrap.indent(textwrap.dedent(body), "    "),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
