"""What reading a hostile office/PDF file costs: time and peak memory, one fresh process each.

    .venv/bin/python benchmarks/bombs.py [--only NAME] [--via grader|mcp|both] [--limit-mib 4096]

Builds the full-size files of :mod:`atoll.testing.bombs` (an ~800 KiB docx that unpacks to
hundreds of MiB, a ~260 KiB workbook of a 100 MiB sheet, a pptx with a 2 GiB media part whose
declared size lies, entity bombs, a PDF claiming 10^9 pages, ...) and reads each in a new
Python process, through the grader's extraction (``grader.extract.extract``) and through the
MCP tool that reads that kind (a real server, in-memory client). The child's address space is
capped at ``--limit-mib`` (so a bomb that is not bounded fails with MemoryError instead of
taking the machine) and its wall time at ``--timeout``. Reports seconds, peak RSS
(``ru_maxrss`` of the child, imports included) and the outcome's first line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_TOOLS = {
    "docx": ("documents", "read_document_content", {}),
    "xlsx": ("spreadsheets", "read_tab", {}),
    "pptx": ("presentations", "read_slides", {}),
    "pdf": ("pdfs", "read_pdf_pages", {"pages": "1-5"}),
}

_CHILD = r"""
import json, resource, sys, time
path, via, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import mcp_servers
from grader.extract import extract  # imports are not what is measured
began = time.perf_counter()
if via == "grader":
    data = open(path, "rb").read()
    result = extract(path, data)
    outcome = result.error or (result.note or "") or f"{len(result.parts)} parts, {len(result.text())} chars"
else:
    import asyncio, pathlib, shutil, tempfile
    from fastmcp import Client
    server_name, tool, extra = json.loads(sys.argv[4])
    base = pathlib.Path(tempfile.mkdtemp())
    (base / "fs").mkdir()
    (base / "apps").mkdir()
    name = pathlib.Path(path).name
    shutil.copy(path, base / "fs" / name)
    server = mcp_servers.create_server(server_name, fs_root=base / "fs", apps_data_root=base / "apps")
    async def call():
        async with Client(server) as client:
            began_call = time.perf_counter()
            result = await client.call_tool(tool, {"file_path": "/" + name, **extra}, raise_on_error=False)
            return result
    began = time.perf_counter()
    result = asyncio.run(call())
    text = result.content[0].text if result.content else ""
    outcome = ("error: " if result.is_error else "ok: ") + text.splitlines()[0][:160] if text else "(empty)"
seconds = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "outcome": outcome[:200]}))
"""


def measure(path: Path, via: str, limit_mib: int, timeout: float) -> dict:
    """Read ``path`` in a child process; its time, peak RSS and outcome (or how it died)."""
    kind = path.suffix.lstrip(".")
    command = [sys.executable, "-c", _CHILD, str(path), via, str(limit_mib << 20), json.dumps(_TOOLS[kind])]
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {
            "seconds": timeout,
            "peak_mib": None,
            "outcome": f"killed after {timeout:.0f} s (still reading)",
        }
    if done.returncode != 0 or not done.stdout.strip():
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {
            "seconds": time.perf_counter() - began,
            "peak_mib": peak,
            "outcome": f"crashed (rc {done.returncode}): {last[:160]}",
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from atoll.testing.bombs import FULL_SIZE

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", help="file name(s) of atoll.testing.bombs.FULL_SIZE")
    parser.add_argument("--via", choices=("grader", "mcp", "both"), default="both")
    parser.add_argument("--limit-mib", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--folder", type=Path, help="where to keep the built files (default: a temp folder)")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="bombs-"))
    folder.mkdir(parents=True, exist_ok=True)
    vias = ("grader", "mcp") if args.via == "both" else (args.via,)
    print("| file | packed | via | seconds | peak RSS MiB | outcome |")
    print("|---|---|---|---|---|---|")
    for name, build in FULL_SIZE.items():
        if args.only and name not in args.only:
            continue
        path = folder / name
        if not path.exists():
            path.write_bytes(build())
        for via in vias:
            result = measure(path, via, args.limit_mib, args.timeout)
            peak = f"{result['peak_mib']:.0f}" if result["peak_mib"] is not None else "–"
            outcome = result["outcome"].replace("|", "/")
            size = f"{path.stat().st_size / 1024:,.0f} KiB"
            print(f"| {name} | {size} | {via} | {result['seconds']:.1f} | {peak} | {outcome} |", flush=True)


if __name__ == "__main__":
    main()
