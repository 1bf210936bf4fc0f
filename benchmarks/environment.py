"""Environment service performance, each figure next to a baseline measured in the same run.

1. Cold start to ready: a fresh `atoll env serve` process, then POST /apps with the app servers
   in-process vs the same servers as stdio children (`atoll mcp NAME --transport stdio`); the
   CPU of `import environment` and of the MCP plane's imports, each in a fresh interpreter.
1a. Trial start: process start -> /health -> populate a ~20 MB world -> POST /apps answered,
   as the orchestrator starts a trial; with --tree, another checkout's code alternating.
2. Tool-call round trip (p50/p99) through the gateway at 1 session and at 16 concurrent sessions,
   both back to back (saturating the machine) and at agent pace (each session one call every
   --pace-ms), vs the same server served on its own by FastMCP (no gateway) and vs a stdio child
   behind the gateway.
2b. Environment CPU per trivial tool call through /mcp (its process's /proc/PID/stat over the
   timed calls), with fastmcp's Client and the official MCP SDK client, at 1 and 16 sessions;
   then the environment's own capacity at 16 sessions under a lean load generator (raw
   Streamable-HTTP sessions on asyncio streams, every reply checked, its own CPU printed), since
   the Python clients cost more CPU per call than the environment on the same 2 cores.
3. Populate and snapshot MB/s vs `tar xzf` / `tar czf` on the same tree, for the domain
   functions and end to end over HTTP.

Targets (issue 3; the 16-session one restated in docs/performance.md): ready <= 1.5 s
in-process; p50 <= 3 ms and p99 <= 15 ms at 1 session; 16 sessions at agent pace: p99 <= 15 ms
(p50 printed next to the machine's own floor); 16 sessions back to back: the gateway serves
>= 0.8x the calls/s of the server alone, p99 <= 4x p50; populate and snapshot >= 0.8x tar.
Issue 19 (2b): <= 0.6 ms environment CPU per call; >= 1,500 calls/s, p99 <= 25 ms at 16 sessions
(printed for the Python clients' rows and for the lean generator's).
Each measurement is repeated (--runs) and the best run is kept; the latency rows are measured
in rounds (every row once per round), so a slow minute on the shared machine costs one
repetition of each row, not every repetition of one.

    .venv/bin/python benchmarks/environment.py [--runs 3] [--size-mb 100] [--calls 800] [--pace-ms 50]
        [--load-calls 8000] [--only start|trial|first|latency|cpu|load|transfer] [--tree DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastmcp import Client

# This file is named like the package it measures: keep its own folder off the import path so
# that `import environment` finds the service, not this script.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

ATOLL = str(Path(sys.executable).parent / "atoll")
USER = {"user_email": "alex@northwind.example", "user_name": "Alex Kim"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def available_servers() -> tuple[list[str], list[str]]:
    from mcp_servers import SERVER_NAMES

    present = [n for n in SERVER_NAMES if importlib.util.find_spec(f"mcp_servers.{n}") is not None]
    return present, [n for n in SERVER_NAMES if n not in present]


class EnvProcess:
    """`atoll env serve` in a subprocess on a free port, over fresh world roots."""

    def __init__(self, world: Path, extra_env: dict[str, str] | None = None) -> None:
        self.world = world
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = extra_env or {}

    def __enter__(self) -> EnvProcess:
        env = {**os.environ, "ATOLL_LOG_LEVEL": "WARNING", **self.extra_env}
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [ATOLL, "env", "serve", "--port", str(self.port), "--fs-root", str(self.world / "filesystem"),
             "--apps-data-root", str(self.world / ".apps_data")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    self.healthy_s = time.perf_counter() - self.started
                    return self
            except httpx.HTTPError:
                time.sleep(0.02)
        raise RuntimeError("environment did not start")

    def __exit__(self, *exc_info: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def apps_config(servers: list[str], transport: str, world: Path) -> dict:
    entries = {}
    for name in servers:
        options = USER if name in ("mail", "chat", "calendar") else {}
        if transport == "inprocess":
            entries[name] = {"transport": "inprocess", "server": name, "options": options}
        else:
            args = ["mcp", name, "--transport", "stdio", "--fs-root", str(world / "filesystem"),
                    "--apps-data-root", str(world / ".apps_data")]  # fmt: skip
            for key, value in options.items():
                args += ["--option", f"{key}={value}"]
            entries[name] = {"transport": "stdio", "command": ATOLL, "args": args}
    return {"mcpServers": entries}


def small_world(root: Path) -> Path:
    (root / "filesystem" / "Reports").mkdir(parents=True, exist_ok=True)
    (root / "filesystem" / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M\n")
    (root / ".apps_data" / "mail").mkdir(parents=True, exist_ok=True)
    (root / ".apps_data" / "mail" / "inbox.mbox").write_text("")
    return root


# -- 1. cold start ----------------------------------------------------------------------------


def _process_cpu_s(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compile_sources() -> list[Path]:
    """Write the compiled caches (``.pyc``) of the code an environment process imports, as an
    installed package or image has them (``pip install`` writes them): a shell with
    ``PYTHONDONTWRITEBYTECODE=1`` and a fresh checkout have none, and compiling ~170 modules
    at every start costs ≈ 0.25 s of CPU that no deployment pays. Returns the trees compiled:
    each ``PYTHONPATH`` entry and this checkout."""
    trees = [Path(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    trees.append(_HERE.parent)
    for tree in trees:
        compile_sources_of(tree)
    return trees


#: Prints the CPU seconds its imports took in a fresh interpreter (after ``import environment``
#: for the plane: what its build imports on the lifespan's worker thread).
_IMPORT_PROBES = {
    "import environment": "import time; t = time.process_time(); import environment; print(time.process_time() - t)",
    "the MCP plane's imports (built in the background)": (
        "import environment, time; t = time.process_time();"
        " import environment.gateway, environment.mcp_fast, environment.mcp_front;"
        " print(time.process_time() - t)"
    ),
}


def _fresh_import_cpu_s(code: str) -> float:
    """CPU seconds that ``code`` (an import probe of :data:`_IMPORT_PROBES`) reports."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=_HERE.parent, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def bench_imports(runs: int) -> None:
    """``import environment`` in a fresh interpreter (issue 19: <= 0.4 s CPU), best of ``runs``
    (at least 5), and the imports the MCP plane's build adds later, for the whole picture."""
    best = {
        label: min(_fresh_import_cpu_s(code) for _ in range(max(runs, 5)))
        for label, code in _IMPORT_PROBES.items()
    }
    for label, cpu_s in best.items():
        print(f"  {label:50} {cpu_s:5.2f} s CPU (fresh interpreter, best of {max(runs, 5)})")
    own = best["import environment"]
    print(f"  target (issue 19): the environment's own import <= 0.4 s CPU: {own:.2f} s ({own / 0.4:.2f}x)"
          f" -> {'met' if own <= 0.4 else 'NOT met'}")  # fmt: skip


def bench_cold_start(servers: list[str], runs: int) -> None:
    print(f"\n## Cold start to ready ({len(servers)} servers: {', '.join(servers)})")
    compiled = compile_sources()
    print(
        f"   compiled caches written first, as an installed image has them: {', '.join(map(str, compiled))}"
    )
    bench_imports(runs)
    variants = {
        # What the orchestrator sees: /apps comes after populate, by which time the environment
        # has imported the app servers in the background (GET /health says so).
        "in-process (after preload)": ("inprocess", True),
        "in-process (/apps right after /health)": ("inprocess", False),
        "stdio children (baseline)": ("stdio", False),
    }
    # (POST /apps s, process start -> /apps answered s, the environment process's CPU s by then)
    results: dict[str, list[tuple[float, float, float]]] = {label: [] for label in variants}
    healthy: list[float] = []  # process start -> first 200 from /health, in-process variants
    for _ in range(runs):
        for label, (transport, wait_preload) in variants.items():
            with tempfile.TemporaryDirectory() as tmp:
                world = small_world(Path(tmp))
                with EnvProcess(world) as env:
                    deadline = time.monotonic() + 120
                    while wait_preload and not httpx.get(f"{env.url}/health").json().get("servers_preloaded"):
                        if time.monotonic() > deadline:
                            raise RuntimeError("app servers were not preloaded within 120 s")
                        time.sleep(0.05)
                    started = time.perf_counter()
                    reply = httpx.post(
                        f"{env.url}/apps", json=apps_config(servers, transport, world), timeout=300
                    )
                    apps_s = time.perf_counter() - started
                    cpu_s = _process_cpu_s(env.process.pid)  # stdio: the children's CPU is not in it
                    if reply.status_code != 200:
                        raise RuntimeError(f"/apps failed for {label}: {reply.text[:500]}")
                    # after the preload: start -> /apps answered includes the wait for it (polled
                    # every 50 ms), since /health now answers before the MCP plane is built
                    total_s = time.perf_counter() - env.started
                    results[label].append((apps_s, total_s, cpu_s))
                    if transport == "inprocess":
                        healthy.append(env.healthy_s)
    best = {label: min(values) for label, values in results.items()}
    for label, values in results.items():
        apps_s, total_s = min(v[0] for v in values), min(v[1] for v in values)
        cpu_s = min(v[2] for v in values)
        print(f"  {label:40} POST /apps {apps_s:6.2f} s   process start -> ready {total_s:6.2f} s"
              f"   environment CPU {cpu_s:5.2f} s")  # fmt: skip
    print(f"  process start -> GET /health answers 200: {min(healthy):.2f} s (the MCP plane is still"
          " being built then; /apps and /mcp wait for it)")  # fmt: skip
    inprocess = best["in-process (after preload)"][0]
    print(f"  stdio / in-process POST /apps = {best['stdio children (baseline)'][0] / inprocess:.1f}x")
    print(f"  target: POST /apps in-process <= 1.5 s -> {'met' if inprocess <= 1.5 else 'NOT met'}")
    cold = results["in-process (/apps right after /health)"]
    wall, cpu = min(v[1] for v in cold), min(v[2] for v in cold)
    print(f"  target (issue 19): process start -> POST /apps answered <= 1.5 s wall, <= 1.2 s CPU:"
          f" {wall:.2f} s ({wall / 1.5:.2f}x of target), {cpu:.2f} s CPU ({cpu / 1.2:.2f}x) -> "
          f"{'met' if wall <= 1.5 and cpu <= 1.2 else 'NOT met'}")  # fmt: skip


def bench_trial_start(servers: list[str], runs: int, tree: Path | None, size_mb: int = 20) -> None:
    """What starting a trial's environment costs the orchestrator: process start, GET /health
    answers, POST /data/populate of a world archive (``size_mb``), POST /apps of the nine
    answered; wall and the environment's CPU, best and median of ``runs``. With ``tree``, the
    same for that checkout's code ("before"), alternating in the same minutes."""
    print(
        f"\n## Trial start: process start -> /health -> populate (~{size_mb} MB world) -> POST /apps answered"
    )
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        make_tree(source, size_mb)
        archive = Path(tmp) / "world.tar.gz"
        subprocess.run(["tar", "czf", str(archive), "-C", str(source), "."], check=True)
        compile_sources()
        forms: list[tuple[str, dict[str, str]]] = [("now", {})]
        if tree is not None:
            compile_sources_of(tree)
            forms.append(("before", {"PYTHONPATH": str(tree)}))
            print(f"   before: {tree} (its own code on PYTHONPATH, compiled)")
        results: dict[str, list[tuple[float, float, float, float]]] = {label: [] for label, _ in forms}
        for _ in range(runs):
            for label, extra in forms:
                world = small_world(Path(tmp) / f"world-{label}")
                with EnvProcess(world, extra) as env, httpx.Client(base_url=env.url, timeout=300) as http:
                    healthy_s = env.healthy_s
                    with archive.open("rb") as upload:
                        http.post(
                            "/data/populate",
                            params={"subsystem": "world", "mode": "replace"},
                            files={"archive": ("w.tar.gz", upload)},
                        ).raise_for_status()
                    populated_s = time.perf_counter() - env.started
                    reply = http.post("/apps", json=apps_config(servers, "inprocess", world))
                    if reply.status_code != 200:
                        raise RuntimeError(f"/apps failed ({label}): {reply.text[:500]}")
                    total_s = time.perf_counter() - env.started
                    results[label].append((healthy_s, populated_s, total_s, _process_cpu_s(env.process.pid)))
                shutil.rmtree(world, ignore_errors=True)
    for label, values in results.items():
        columns = list(zip(*values, strict=True))
        best = [min(column) for column in columns]
        median = [statistics.median(column) for column in columns]
        print(
            f"  {label:7} /health {best[0]:5.2f} s   populated {best[1]:5.2f} s   /apps answered"
            f" {best[2]:5.2f} s (median {median[2]:5.2f})   environment CPU {best[3]:5.2f} s (median {median[3]:5.2f})"
        )
    if tree is not None:
        now, before = (statistics.median(v[2] for v in results[label]) for label in ("now", "before"))
        print(f"  before / now, process start -> /apps answered (medians): {before / now:.2f}x")


def compile_sources_of(tree: Path) -> None:
    """Write the compiled caches of another checkout's packages (see :func:`compile_sources`)."""
    import compileall

    for package in ("atoll", "environment", "mcp_servers"):
        if (tree / package).is_dir():
            compileall.compile_dir(tree / package, quiet=1)


# -- 1b. first call of each server vs its warm calls -----------------------------------------

#: One read-only call per server on the small world of :func:`document_world`, and the library
#: that server imports on its first call (None: nothing heavy).
FIRST_CALLS: dict[str, tuple[str, dict, str | None]] = {
    "mail": ("mail_list_mails", {"limit": 20}, None),
    "calendar": ("calendar_list_events", {"limit": 20}, "icalendar"),
    "chat": ("chat_list_channels", {}, None),
    "filesystem": ("filesystem_list_files", {}, None),
    "spreadsheets": ("spreadsheets_read_tab", {"file_path": "/book.xlsx", "tab_index": 0}, "openpyxl"),
    "documents": ("documents_read_document_content", {"file_path": "/memo.docx"}, "docx"),
    "pdfs": ("pdfs_read_pdf_pages", {"file_path": "/report.pdf"}, "pymupdf"),
    "presentations": ("presentations_read_slides", {"file_path": "/deck.pptx"}, "pptx"),
}


def document_world(root: Path) -> Path:
    """A world with one small file per format and a little mail, calendar and chat data."""
    import docx
    import openpyxl
    import pptx
    import pymupdf

    apps = _apps_benchmark()
    fs = root / "filesystem"
    fs.mkdir(parents=True)
    (fs / "notes.txt").write_text("Q3 revenue: 4.2M\n")
    book = openpyxl.Workbook()
    for row in range(1, 21):
        book.active.append([f"item {row}", row, row * 1.5])
    book.save(fs / "book.xlsx")
    memo = docx.Document()
    for line in range(10):
        memo.add_paragraph(f"Paragraph {line} of the memo.")
    memo.save(fs / "memo.docx")
    pdf = pymupdf.open()
    for number in range(3):
        pdf.new_page().insert_text((72, 72), f"Page {number + 1}: revenue grew.")
    pdf.save(fs / "report.pdf")
    deck = pptx.Presentation()
    for number in range(3):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {number + 1}"
    deck.save(fs / "deck.pptx")
    data = root / ".apps_data"
    for folder in ("mail", "calendar", "chat/Groups"):
        (data / folder).mkdir(parents=True)
    apps.generate_mbox(data / "mail" / "inbox.mbox", 200)
    apps.generate_ics(data / "calendar" / "team.ics", 200)
    apps.generate_chat_group(data / "chat" / "Groups" / "Space AAAA", 500)
    return root


def _apps_benchmark() -> Any:
    """benchmarks/apps.py (its data generators), loaded by path: this folder is off sys.path."""
    spec = importlib.util.spec_from_file_location("atoll_bench_apps", _HERE / "apps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _import_cpu_s(module: str) -> float:
    """CPU seconds a fresh interpreter spends importing ``module`` (beyond starting up)."""
    code = f"import time; t = time.process_time(); import {module}; print(time.process_time() - t)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(completed.stdout.strip())


async def _first_and_warm(
    url: str, servers: list[str], pid: int, warm: int
) -> dict[str, tuple[float, float, float, float]]:
    """Per server: (first call s, its CPU s, warm p50 s, warm mean CPU s), all in one session."""
    measured = {}
    async with Client(url, timeout=120) as mcp:
        await mcp.list_tools()  # the client lists the tools once per session (output schemas)
        for name in servers:
            tool, arguments, _ = FIRST_CALLS[name]
            cpu = _process_cpu_s(pid)
            started = time.perf_counter()
            result = await mcp.call_tool(tool, arguments, raise_on_error=False)
            first_s, first_cpu = time.perf_counter() - started, _process_cpu_s(pid) - cpu
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
            timings = []
            cpu = _process_cpu_s(pid)
            for _ in range(warm):
                started = time.perf_counter()
                await mcp.call_tool(tool, arguments)
                timings.append(time.perf_counter() - started)
            warm_cpu = (_process_cpu_s(pid) - cpu) / warm
            measured[name] = (first_s, first_cpu, statistics.median(timings), warm_cpu)
    return measured


def bench_first_calls(runs: int) -> None:
    print("\n## First call of each server after POST /apps vs its warm calls (/apps right after /health)")
    print("  first = the server's first call, warm = 20 later calls (p50 latency, mean CPU), import = CPU of")
    print(
        "  importing the server's document library in a fresh interpreter; CPU is the environment process's"
    )
    print("  (10 ms clock ticks), the steadier figure on a loaded machine")
    servers = [name for name in FIRST_CALLS if importlib.util.find_spec(f"mcp_servers.{name}")]
    rows: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in servers}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            world = document_world(Path(tmp))
            with EnvProcess(world) as env:
                reply = httpx.post(
                    f"{env.url}/apps", json=apps_config(servers, "inprocess", world), timeout=300
                )
                if reply.status_code != 200:
                    raise RuntimeError(f"/apps failed: {reply.text[:500]}")
                measured = asyncio.run(_first_and_warm(f"{env.url}/mcp", servers, env.process.pid, 20))
                for name in servers:
                    rows[name].append(measured[name])
    print(f"  {'server':14} {'first ms':>9} {'warm p50 ms':>12} | {'first CPU ms':>13} {'warm CPU ms':>12}"
          f" {'import CPU ms':>14} {'first - warm - import':>22}")  # fmt: skip
    for name in servers:
        first_s, warm_s = min(r[0] for r in rows[name]), min(r[2] for r in rows[name])
        first_cpu, warm_cpu = min(r[1] for r in rows[name]), min(r[3] for r in rows[name])
        library = FIRST_CALLS[name][2]
        import_cpu = _import_cpu_s(library) if library else 0.0
        excess = first_cpu - warm_cpu - import_cpu
        print(f"  {name:14} {first_s * 1000:9.1f} {warm_s * 1000:12.1f} | {first_cpu * 1000:13.0f}"
              f" {warm_cpu * 1000:12.1f} {import_cpu * 1000:14.1f} {excess * 1000:+22.0f}"
              f"  {'met' if excess <= 0.010 else 'NOT met'}")  # fmt: skip
    print(
        "  target (issue 19): first call <= warm + the one library import, in CPU (last column <= one 10 ms tick)"
    )


# -- 2. tool-call latency ---------------------------------------------------------------------


async def _latencies(
    url: str, tool: str, arguments: dict, sessions: int, calls: int, pace_s: float = 0.0
) -> list[float]:
    """Round trips of ``calls`` calls spread over ``sessions`` concurrent MCP sessions.

    ``pace_s == 0``: each session calls back to back (closed loop: the machine is saturated).
    ``pace_s > 0``: each session makes one call every ``pace_s`` seconds, as an agent does
    between model turns (phases spread at random so the sessions do not move in lockstep).
    """

    async def one(count: int) -> list[float]:
        async with Client(url, timeout=60) as mcp:
            for _ in range(20):
                await mcp.call_tool(tool, arguments)
            if pace_s:
                await asyncio.sleep(random.random() * pace_s)
            timings = []
            next_at = time.perf_counter()
            for _ in range(count):
                started = time.perf_counter()
                await mcp.call_tool(tool, arguments)
                timings.append(time.perf_counter() - started)
                if pace_s:
                    next_at += pace_s
                    await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            return timings

    per_session = max(calls // sessions, 50)
    groups = await asyncio.gather(*(one(per_session) for _ in range(sessions)))
    return [t for group in groups for t in group]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class _Row:
    """p50/p99 (ms) of one run and its calls/s: offered (paced) or served (back to back, by
    Little's law: sessions / mean latency)."""

    def __init__(self, timings: list[float], sessions: int, pace_s: float) -> None:
        self.p50, self.p99 = _pct(timings, 0.5), _pct(timings, 0.99)
        self.rate = sessions / pace_s if pace_s else sessions / statistics.fmean(timings)


def _measure(url: str, tool: str, arguments: dict, sessions: int, calls: int, pace_s: float = 0.0) -> _Row:
    return _Row(asyncio.run(_latencies(url, tool, arguments, sessions, calls, pace_s)), sessions, pace_s)


async def _health_round_trips(url: str, count: int, pace_s: float) -> list[float]:
    """Plain HTTP round trips to ``/health``: what this machine's loopback and scheduler cost."""
    async with httpx.AsyncClient(base_url=url) as http:
        for _ in range(20):
            await http.get("/health")
        timings = []
        for _ in range(count):
            started = time.perf_counter()
            await http.get("/health")
            timings.append(time.perf_counter() - started)
            await asyncio.sleep(pace_s)
        return timings


def _wait_answering(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.post(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 60 s")


def _wait_preloaded(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/health", timeout=5).json().get("servers_preloaded"):
            return
        time.sleep(0.2)
    raise RuntimeError("app servers were not preloaded within 120 s")


def bench_latency(calls: int, runs: int, pace_ms: float) -> None:
    print("\n## Tool-call round trip (filesystem_list_files, FastMCP client over loopback HTTP)")
    # The client's own full garbage collections (~100 ms over its imported heap) would show up
    # as the environment's p99; take the client's startup heap out of them, as the services do.
    gc.collect()
    gc.freeze()
    tool, arguments = "list_files", {"path": "/Reports"}
    pace_s = pace_ms / 1000
    rows: dict[str, _Row] = {}
    with tempfile.TemporaryDirectory() as tmp:
        world = small_world(Path(tmp))
        # Baseline: the same server alone, served by FastMCP itself (no gateway in between).
        port = free_port()
        alone = subprocess.Popen(
            [ATOLL, "mcp", "filesystem", "--transport", "http", "--port", str(port),
             "--fs-root", str(world / "filesystem"), "--apps-data-root", str(world / ".apps_data")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with EnvProcess(world) as env:
                config = apps_config(["filesystem"], "inprocess", world)
                config["mcpServers"]["stdiofs"] = apps_config(["filesystem"], "stdio", world)["mcpServers"][
                    "filesystem"
                ]
                assert httpx.post(f"{env.url}/apps", json=config, timeout=120).status_code == 200
                _wait_preloaded(env.url)  # the background imports would otherwise share the CPU
                alone_url = f"http://127.0.0.1:{port}/mcp"
                _wait_answering(alone_url)
                url = f"{env.url}/mcp"
                plan: dict[str, Callable[[], _Row]] = {}
                for sessions in (1, 16):
                    for label, target, name in (
                        ("gateway, in-process", url, "filesystem_"),
                        ("gateway, stdio child", url, "stdiofs_"),
                        ("server alone (baseline)", alone_url, ""),
                    ):
                        plan[f"{label}, {sessions} back to back"] = partial(
                            _measure, target, name + tool, arguments, sessions, calls
                        )
                # Agent pace: 16 sessions, each one call every pace_s. (A lone paced session
                # mostly measures how fast this VM wakes from idle, not the environment: see docs.)
                plan["gateway, in-process, 16 at agent pace"] = partial(
                    _measure, url, "filesystem_" + tool, arguments, 16, calls, pace_s
                )
                floors: list[tuple[list[float], list[float]]] = []
                # Rounds: every row once per round, so a slow minute on this shared machine hits
                # one repetition of each row rather than every repetition of one row. The run
                # with the lowest p50 of each row is kept.
                for _ in range(runs):
                    floors.append(
                        (
                            asyncio.run(_health_round_trips(env.url, 100, 0.0)),
                            asyncio.run(_health_round_trips(env.url, 100, pace_s)),
                        )
                    )
                    for label, measure in plan.items():
                        row = measure()
                        if label not in rows or row.p50 < rows[label].p50:
                            rows[label] = row
        finally:
            alone.terminate()
            alone.wait(timeout=20)
    floor_back_to_back = min(_pct(back_to_back, 0.5) for back_to_back, _ in floors)
    floor_paced = min(_pct(paced, 0.5) for _, paced in floors)
    print(f"  (agent pace: each session makes one call every {pace_ms:g} ms)")
    print(
        f"  machine floor, GET /health (1 client): p50 {floor_back_to_back:.2f} ms back to back, "
        f"{floor_paced:.2f} ms every {pace_ms:g} ms (waking idle processes)"
    )
    for label, row in rows.items():
        print(f"  {label:46} p50 {row.p50:6.2f} ms   p99 {row.p99:6.2f} ms   {row.rate:5.0f} calls/s")
    gateway, alone_row = (
        rows["gateway, in-process, 16 back to back"],
        rows["server alone (baseline), 16 back to back"],
    )
    print(f"  16 back to back: gateway calls/s / server-alone calls/s = {gateway.rate / alone_row.rate:.2f}")

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    one, paced = rows["gateway, in-process, 1 back to back"], rows["gateway, in-process, 16 at agent pace"]
    print(f"  target, 1 back to back: p50 <= 3 ms, p99 <= 15 ms -> {verdict(one.p50 <= 3 and one.p99 <= 15)}")
    print(f"  target, 16 at agent pace: p99 <= 15 ms -> {verdict(paced.p99 <= 15)}")
    print(
        f"    (its p50, {paced.p50:.2f} ms, is {paced.p50 - floor_paced:.2f} ms above this machine's paced floor;"
        f" p50 <= 3 ms {'holds' if paced.p50 <= 3 else 'does not hold'} here)"
    )
    print(
        "  target, 16 sessions back to back: gateway >= 0.8x the server alone's calls/s "
        f"({gateway.rate / alone_row.rate:.2f}x), p99 <= 4x p50 ({gateway.p99 / gateway.p50:.1f}x) -> "
        f"{verdict(gateway.rate >= 0.8 * alone_row.rate and gateway.p99 <= 4 * gateway.p50)}"
    )


# -- 2b. environment CPU per call (issue 19 point 2) ------------------------------------------


class _SdkClient:
    """The official MCP Python SDK's client (streamable HTTP), with the fastmcp Client's shape."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> _SdkClient:
        from contextlib import AsyncExitStack

        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        self._stack = AsyncExitStack()
        read, write, *_ = await self._stack.enter_async_context(streamable_http_client(self.url))
        self._session = await self._stack.enter_async_context(ClientSession(read, write))
        await self._session.initialize()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def call_tool(self, name: str, arguments: dict) -> Any:
        result = await self._session.call_tool(name, arguments)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
        return result


def _client(kind: str, url: str) -> Any:
    return _SdkClient(url) if kind == "mcp SDK" else Client(url, timeout=60)


async def _cpu_per_call_run(
    kind: str, url: str, pid: int, tool: str, arguments: dict, sessions: int, calls: int
) -> tuple[list[float], float, float]:
    """(latencies, environment CPU s per call, wall s) of ``calls`` calls over ``sessions`` sessions
    calling back to back; the environment process's CPU is read around the timed calls only."""
    per_session = max(calls // sessions, 20)
    ready = asyncio.Event()
    warmed = 0
    warm_done = asyncio.Event()

    async def one() -> list[float]:
        nonlocal warmed
        async with _client(kind, url) as mcp:
            for _ in range(20):
                await mcp.call_tool(tool, arguments)
            warmed += 1
            if warmed == sessions:
                warm_done.set()
            await ready.wait()
            timings = []
            for _ in range(per_session):
                started = time.perf_counter()
                await mcp.call_tool(tool, arguments)
                timings.append(time.perf_counter() - started)
            return timings

    tasks = [asyncio.ensure_future(one()) for _ in range(sessions)]
    await warm_done.wait()
    cpu_before, wall_before = _process_cpu_s(pid), time.perf_counter()
    ready.set()
    groups = await asyncio.gather(*tasks)
    wall = time.perf_counter() - wall_before
    cpu = _process_cpu_s(pid) - cpu_before
    timings = [t for group in groups for t in group]
    return timings, cpu / len(timings), wall


# The environment's own capacity: a lean load generator (raw Streamable-HTTP sessions), so that
# the clients' CPU does not set the 16-session figure.

#: The handshake-era protocol version the lean generator asks for in ``initialize``.
LOAD_HANDSHAKE_VERSION = "2025-11-25"
#: The session-less protocol version (each request carries its envelope in ``_meta``).
LOAD_MODERN_VERSION = "2026-07-28"
_LOAD_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": LOAD_MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "atoll-load", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class LoadError(RuntimeError):
    """A reply the load generator refuses: its HTTP status or framing, or a JSON-RPC reply that
    is not the successful result of the request sent (wrong id, an error, ``isError``)."""


class RawMcpSession:
    """One MCP session over one keep-alive HTTP/1.1 connection, written in raw bytes on asyncio
    streams, so that the client costs little next to the environment it loads.

    Handshake era (``modern=False``): ``open()`` POSTs ``initialize`` (and keeps the
    ``Mcp-Session-Id`` and the negotiated protocol version it answers), then
    ``notifications/initialized``; every ``tools/call`` carries both headers. ``modern=True``:
    2026-07-28, no session; each call carries the envelope in ``_meta`` and the ``Mcp-Method`` /
    ``Mcp-Name`` routing headers. Replies must be JSON with a Content-Length (what the
    environment answers with ``mcp_json_response`` on); anything else — chunked or SSE bodies,
    a closed connection, another status — raises LoadError, as does any reply that is not the
    successful result of the call sent.
    """

    def __init__(self, url: str, *, modern: bool = False) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"{url!r}: the load generator speaks plain http://HOST:PORT/PATH only")
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path or "/"
        self.modern = modern
        self.protocol_version = LOAD_MODERN_VERSION if modern else LOAD_HANDSHAKE_VERSION
        self.session_id: str | None = None
        self._next_id = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._heads: dict[str, bytes] = {}

    async def __aenter__(self) -> RawMcpSession:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        if not self.modern:
            await self._handshake()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    def _head(self, session: bool, method: str | None = None, name: str | None = None) -> bytes:
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
        ]
        if session:
            lines.append(f"MCP-Protocol-Version: {self.protocol_version}")
            if self.session_id is not None:
                lines.append(f"Mcp-Session-Id: {self.session_id}")
        if self.modern and method is not None:
            lines.append(f"Mcp-Method: {method}")
            if name is not None:
                lines.append(f"Mcp-Name: {name}")
        return ("\r\n".join(lines) + "\r\n").encode("ascii")

    async def _post(self, head: bytes, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        """Send one request on the connection and read its response (status, headers, body)."""
        assert self._reader is not None and self._writer is not None
        self._writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        try:
            raw = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise LoadError("the environment closed the connection before answering") from exc
        lines = raw[:-4].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if version != b"HTTP/1.1" or not rest[:3].isdigit():
            raise LoadError(f"not an HTTP/1.1 status line: {lines[0]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise LoadError(f"malformed response header: {line!r}")
            headers[name.strip().lower()] = value.strip()
        if b"transfer-encoding" in headers:
            raise LoadError(
                f"Transfer-Encoding {headers[b'transfer-encoding']!r}: only Content-Length bodies are read"
            )
        if b"content-length" not in headers:
            raise LoadError("a response without Content-Length (the generator needs JSON responses)")
        try:
            body = await self._reader.readexactly(int(headers[b"content-length"]))
        except asyncio.IncompleteReadError as exc:
            raise LoadError("the environment closed the connection mid-body") from exc
        if headers.get(b"connection", b"").lower() == b"close":
            raise LoadError("the environment closed the keep-alive connection")
        return int(rest[:3]), headers, body

    def _reply(self, status: int, headers: dict[bytes, bytes], body: bytes, request_id: int) -> dict:
        """The ``result`` of the reply to request ``request_id``; LoadError for anything else."""
        if status != 200:
            raise LoadError(f"HTTP {status} to request {request_id}: {body[:200]!r}")
        content_type = headers.get(b"content-type", b"")
        if not content_type.startswith(b"application/json"):
            raise LoadError(f"content-type {content_type!r} to request {request_id}: JSON responses only")
        try:
            reply = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise LoadError(f"reply to request {request_id} is not JSON: {body[:200]!r}") from exc
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise LoadError(f"reply {body[:200]!r} is not the one to request {request_id}")
        result = reply.get("result")
        if "error" in reply or not isinstance(result, dict):
            raise LoadError(f"request {request_id} failed: {body[:300]!r}")
        return result

    async def _handshake(self) -> None:
        self._next_id += 1
        params = {"protocolVersion": LOAD_HANDSHAKE_VERSION, "capabilities": {},
                  "clientInfo": {"name": "atoll-load", "version": "0"}}  # fmt: skip
        body = orjson.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": "initialize", "params": params})
        status, headers, answer = await self._post(self._head(session=False), body)
        result = self._reply(status, headers, answer, self._next_id)
        session_id, version = headers.get(b"mcp-session-id"), result.get("protocolVersion")
        if not session_id or not isinstance(version, str):
            raise LoadError(f"initialize answered no Mcp-Session-Id or protocol version: {answer[:300]!r}")
        self.session_id, self.protocol_version = session_id.decode("ascii"), version
        body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        status, _, answer = await self._post(self._head(session=True), body)
        if status != 202:
            raise LoadError(f"notifications/initialized answered HTTP {status}: {answer[:200]!r}")

    async def call_tool(self, name: str, arguments: dict) -> dict:
        """Call tool ``name``; its result. LoadError unless it is a result and not ``isError``."""
        head = self._heads.get(name)
        if head is None:
            head = self._heads[name] = self._head(session=True, method="tools/call", name=name)
        self._next_id += 1
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if self.modern:
            params["_meta"] = _LOAD_ENVELOPE
        body = orjson.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call", "params": params})
        status, headers, answer = await self._post(head, body)
        result = self._reply(status, headers, answer, self._next_id)
        if result.get("isError", False) is not False:
            raise LoadError(f"{name} answered isError: {answer[:300]!r}")
        return result


class LoadRun:
    """What one run of :func:`lean_load` measured: every timed call succeeded (a failed call
    raises instead), ``timings`` holds one round trip (s) per timed call."""

    def __init__(
        self, timings: list[float], wall_s: float, client_cpu_s: float, env_cpu_s: float | None
    ) -> None:
        self.timings, self.wall_s = timings, wall_s
        self.client_cpu_s, self.env_cpu_s = client_cpu_s, env_cpu_s

    @property
    def calls(self) -> int:
        return len(self.timings)

    @property
    def rate(self) -> float:
        return self.calls / self.wall_s


async def lean_load(
    url: str, tool: str, arguments: dict, *, sessions: int, calls: int, warmup: int = 20,
    pid: int | None = None, modern: bool = False,
) -> LoadRun:  # fmt: skip
    """``sessions`` concurrent raw MCP sessions (:class:`RawMcpSession`) each calling ``tool``
    ``warmup`` times, then, all together, ``calls // sessions`` more back to back, timed.

    The generator's CPU (``time.process_time``) and, given ``pid``, that process's CPU
    (/proc/PID/stat) are read around the timed calls only. Raises LoadError on the first reply
    that is not a successful result (the other sessions are cancelled): no figure is reported
    for a run with a failed call.
    """
    per_session = max(calls // sessions, 1)
    warmed = 0
    warm_done, start = asyncio.Event(), asyncio.Event()

    async def one() -> list[float]:
        nonlocal warmed
        async with RawMcpSession(url, modern=modern) as session:
            for _ in range(warmup):
                await session.call_tool(tool, arguments)
            warmed += 1
            if warmed == sessions:
                warm_done.set()
            await start.wait()
            timings = []
            clock = time.perf_counter
            for _ in range(per_session):
                started = clock()
                await session.call_tool(tool, arguments)
                timings.append(clock() - started)
            return timings

    tasks = [asyncio.ensure_future(one()) for _ in range(sessions)]
    try:
        waiter = asyncio.ensure_future(warm_done.wait())
        done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:  # a session ended (failed) before all were warm
            waiter.cancel()
            for task in done:
                task.result()
        env_before = _process_cpu_s(pid) if pid is not None else 0.0
        client_before, wall_before = time.process_time(), time.perf_counter()
        start.set()
        groups = await asyncio.gather(*tasks)
        wall = time.perf_counter() - wall_before
        client_cpu = time.process_time() - client_before
        env_cpu = _process_cpu_s(pid) - env_before if pid is not None else None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return LoadRun([t for group in groups for t in group], wall, client_cpu, env_cpu)


def _lean_load_rows(
    envs: list[tuple[str, EnvProcess]], tool: str, arguments: dict, calls: int, runs: int
) -> None:
    """The environment's own capacity at 16 sessions: :func:`lean_load` against each of ``envs``
    (runs alternating between them), handshake-era sessions and 2026-07-28 session-less calls;
    best (most calls/s) of ``runs`` per environment and form, and issue 19's target for "lean"."""
    print(
        f"  lean load generator: 16 raw MCP sessions, one keep-alive HTTP/1.1 connection each, every"
        f" reply parsed and checked; {calls} timed calls per run, generator in 1 process (this one)"
    )
    for modern, form in ((False, "handshake"), (True, "2026-07-28")):
        every: dict[str, list[LoadRun]] = {label: [] for label, _ in envs}
        for _ in range(runs):
            for label, env in envs:
                every[label].append(asyncio.run(
                    lean_load(f"{env.url}/mcp", tool, arguments, sessions=16, calls=calls, pid=env.process.pid,
                              modern=modern)
                ))  # fmt: skip
        best = {label: max(results, key=lambda run: run.rate) for label, results in every.items()}
        for label, _ in envs:
            run = best[label]
            env_ms, client_ms = run.env_cpu_s * 1000 / run.calls, run.client_cpu_s * 1000 / run.calls
            print(
                f"  lean generator  16 sessions {form:10} {label:7}: environment CPU {env_ms:5.2f} ms/call"
                f" ({env_ms / 0.6:.2f}x of 0.6 ms)   {run.rate:5.0f} calls/s   p50 {_pct(run.timings, 0.5):6.2f} ms"
                f"   p99 {_pct(run.timings, 0.99):6.2f} ms   generator CPU {client_ms:4.2f} ms/call"
                f" ({run.client_cpu_s / run.wall_s:.2f} of a core)"
            )
            if len(every[label]) > 1:
                print(
                    "      every run: "
                    + ", ".join(f"{r.rate:.0f}/s {r.env_cpu_s * 1000 / r.calls:.2f} ms p99 {_pct(r.timings, 0.99):.0f}"
                                for r in every[label])
                )  # fmt: skip
            if run.client_cpu_s / run.wall_s > 0.8:
                print("      the generator used most of a core: it may be what limits this row")
        run = best["lean"]
        env_ms, p99 = run.env_cpu_s * 1000 / run.calls, _pct(run.timings, 0.99)
        ok = env_ms <= 0.6 and run.rate >= 1500 and p99 <= 25
        print(
            f"    target (issue 19, the environment's own capacity, {form}): <= 0.6 ms CPU/call, >= 1,500"
            f" calls/s, p99 <= 25 ms at 16 sessions -> {'met' if ok else 'NOT met'} (CPU {env_ms / 0.6:.2f}x of"
            f" 0.6 ms, {run.rate / 1500:.2f}x of 1,500 calls/s, p99 {p99 / 25:.2f}x of 25 ms;"
            f" {os.cpu_count()} CPUs shared with the generator; load average {os.getloadavg()[0]:.1f})"
        )


def bench_cpu_per_call(
    calls: int, runs: int, tree: Path | None = None, load_calls: int = 8000, clients: bool = True
) -> None:
    """Environment CPU per trivial in-process tool call through /mcp, with both Python clients.

    Two `atoll env serve` subprocesses run side by side on the same world: one as configured
    (the lean /mcp path, environment/mcp_fast.py) and a baseline with ATOLL_MCP_FAST_PATH=false
    (every request through fastmcp's server machinery). With ``tree`` (another checkout, e.g.
    an older commit's), a third runs that tree's code as configured ("before"). Their runs
    alternate, so all see the same machine load. CPU is each process's user + system time
    (/proc/PID/stat, 10 ms ticks) over the timed calls divided by the calls; best (lowest CPU)
    of --runs per environment. Then the same environments under the lean load generator
    (:func:`_lean_load_rows`: what the environment itself serves, without the Python clients'
    CPU); ``clients=False`` runs only those rows.
    """
    print("\n## Environment CPU per call (filesystem_list_files, in-process, through /mcp)")
    print("   lean: the /mcp fast path; fastmcp: ATOLL_MCP_FAST_PATH=false (same process build)")
    if tree is not None:
        print(f"   before: {tree} as configured (its own code on PYTHONPATH)")
    gc.collect()
    gc.freeze()
    tool, arguments = "filesystem_list_files", {"path": "/Reports"}
    with tempfile.TemporaryDirectory() as tmp:
        world = small_world(Path(tmp))
        with contextlib.ExitStack() as stack:
            lean = stack.enter_context(EnvProcess(world))
            baseline = stack.enter_context(EnvProcess(world, {"ATOLL_MCP_FAST_PATH": "false"}))
            envs = [("lean", lean), ("fastmcp", baseline)]
            if tree is not None:
                envs.insert(1, ("before", stack.enter_context(EnvProcess(world, {"PYTHONPATH": str(tree)}))))
            config = apps_config(["filesystem"], "inprocess", world)
            for _, env in envs:
                assert httpx.post(f"{env.url}/apps", json=config, timeout=120).status_code == 200
                _wait_preloaded(env.url)
            for kind in ("fastmcp Client", "mcp SDK") if clients else ():
                for sessions in (1, 16):
                    best: dict[str, tuple[list[float], float, float]] = {}
                    for _ in range(runs):
                        for label, env in envs:
                            result = asyncio.run(
                                _cpu_per_call_run(
                                    kind, f"{env.url}/mcp", env.process.pid, tool, arguments, sessions, calls
                                )
                            )
                            if label not in best or result[1] < best[label][1]:
                                best[label] = result
                    for label, _ in envs:
                        timings, cpu_per_call, wall = best[label]
                        rate = len(timings) / wall
                        print(
                            f"  {kind:15} {sessions:2} session(s) {label:7}: environment CPU"
                            f" {cpu_per_call * 1000:5.2f} ms/call ({cpu_per_call * 1000 / 0.6:.2f}x of 0.6 ms)"
                            f"   {rate:5.0f} calls/s   p50 {_pct(timings, 0.5):6.2f} ms"
                            f"   p99 {_pct(timings, 0.99):6.2f} ms"
                        )
                    ratio = best["lean"][1] / best["fastmcp"][1]
                    print(f"    lean / fastmcp CPU per call: {ratio:.2f}")
                    if tree is not None:
                        print(f"    lean / before CPU per call: {best['lean'][1] / best['before'][1]:.2f}")
                    if sessions == 16:
                        timings, cpu_per_call, wall = best["lean"]
                        rate = len(timings) / wall
                        ok = cpu_per_call <= 0.0006 and rate >= 1500 and _pct(timings, 0.99) <= 25
                        print(
                            f"    target (issue 19): <= 0.6 ms CPU/call, >= 1,500 calls/s, p99 <= 25 ms at 16"
                            f" sessions -> {'met' if ok else 'NOT met'} (client and environment share the"
                            f" {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f})"
                        )
            _lean_load_rows(envs, tool, arguments, load_calls, runs)


# -- 3. populate / snapshot throughput --------------------------------------------------------


def make_tree(root: Path, size_mb: int) -> int:
    """A world-like tree: text reports (compressible), binary blobs, and many small JSON files."""
    rng = random.Random(7)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(4000)
    ]
    fs, apps = root / "filesystem", root / ".apps_data"
    text_mb, blob_mb, small_mb = size_mb * 5 // 10, size_mb * 3 // 10, max(size_mb // 10, 1)
    for index in range(text_mb):
        folder = fs / f"Reports{index % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"report{index:03}.txt").write_text(" ".join(rng.choices(words, k=165_000))[: 1 << 20])
    for index in range(max(blob_mb // 4, 1)):
        (fs / f"scan{index:02}.bin").write_bytes(os.urandom(4 << 20))
    for index in range(small_mb * 200):
        folder = apps / "chat" / f"Groups/Space {index % 40:02}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"message{index:05}.json").write_text(" ".join(rng.choices(words, k=700))[:5000])
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process and its reaped children, plus process ``pid``."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _best(
    runs: int, action: Callable[[], None], before: Callable[[], None] = lambda: None, pid: int | None = None
) -> tuple[float, float]:
    """Best wall time and best CPU time over ``runs`` (CPU time is barely touched by other load)."""
    walls, cpus = [], []
    for _ in range(runs):
        before()
        cpu_before = _cpu_seconds(pid)
        started = time.perf_counter()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu_seconds(pid) - cpu_before)
    return min(walls), min(cpus)


def _paired_ratio(
    runs: int, baseline: Callable[[], None], ours: Callable[[], None], before: Callable[[], None]
) -> float:
    """Median over ``runs`` interleaved (baseline, ours) pairs of baseline time / our time.

    This machine's disk speed drifts 2-3x within minutes with other jobs' I/O; timing the two
    back to back, pair after pair, cancels that drift instead of comparing a fast minute of
    one with a slow minute of the other."""
    ratios = []
    for _ in range(runs):
        times = []
        for action in (baseline, ours):
            before()
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
        ratios.append(times[0] / times[1])
    return statistics.median(ratios)


def bench_transfer(size_mb: int, runs: int) -> None:
    from environment.archive import ArchiveLimits
    from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
    from environment.snapshot import write_snapshot

    print(f"\n## Populate and snapshot throughput (~{size_mb} MB tree)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        source = tmp_path / "source"
        total = make_tree(source, size_mb)
        archive = tmp_path / "world.tar.gz"
        subprocess.run(
            ["tar", "czf", str(archive), "-C", str(source), "filesystem", ".apps_data"], check=True
        )
        out = tmp_path / "out"
        mb = total / 1e6

        def clean() -> None:
            # Every variant starts from an empty target and a flushed page cache, so no run pays
            # for the previous run's write-back.
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            os.sync()

        def ours_populate() -> None:
            with archive.open("rb") as stream:
                populate(
                    [PopulateSource(Subsystem.parse("world"), file=stream)],
                    WorldRoots(out / "filesystem", out / ".apps_data"),
                    limits=ArchiveLimits(max_bytes=1 << 40, max_ratio=1e9),
                )

        def ours_snapshot() -> None:
            with (tmp_path / "snap.tar.gz").open("wb") as sink:
                write_snapshot(WorldRoots(source / "filesystem", source / ".apps_data"), sink)

        def untar() -> None:
            subprocess.run(["tar", "xzf", str(archive), "-C", str(out)], check=True)

        def mktar() -> None:
            subprocess.run(
                ["tar", "czf", str(tmp_path / "t.tar.gz"), "-C", str(source), "filesystem", ".apps_data"],
                check=True,
            )

        tar_x = _best(runs, untar, clean)
        our_x = _best(runs, ours_populate, clean)
        tar_c = _best(runs, mktar, os.sync)
        our_c = _best(runs, ours_snapshot, os.sync)
        paired_x = _paired_ratio(max(runs, 5), untar, ours_populate, clean)
        paired_c = _paired_ratio(max(runs, 5), mktar, ours_snapshot, os.sync)

        # End to end over HTTP (upload + extract; snapshot build + download).
        world = tmp_path / "http-world"

        def clean_http_world() -> None:
            for root in (world / "filesystem", world / ".apps_data"):
                shutil.rmtree(root, ignore_errors=True)
                root.mkdir(parents=True)
            os.sync()

        with EnvProcess(world) as env, httpx.Client(base_url=env.url, timeout=600) as http:

            def http_populate() -> None:
                with archive.open("rb") as upload:
                    reply = http.post(
                        "/data/populate",
                        params={"subsystem": "world", "mode": "replace"},
                        files={"archive": ("w.tar.gz", upload)},
                    )
                    reply.raise_for_status()

            def http_populate_raw() -> None:
                with archive.open("rb") as upload:
                    reply = http.post(
                        "/data/populate",
                        params={"subsystem": "world", "mode": "replace"},
                        content=upload,
                        headers={"content-type": "application/gzip"},
                    )
                    reply.raise_for_status()

            pid = env.process.pid
            http_x = _best(runs, http_populate, clean_http_world, pid)
            http_raw = _best(runs, http_populate_raw, clean_http_world, pid)
            http_c = _best(runs, lambda: http.post("/data/snapshot").raise_for_status(), os.sync, pid)
        files = sum(1 for p in source.rglob("*") if p.is_file())
        archive_mb = archive.stat().st_size / 1e6

    print(f"  tree: {mb:.0f} MB in {files} files; tar.gz {archive_mb:.0f} MB")
    print("  MB/s by wall time (best run), and in brackets the speed ratio to tar by wall / by CPU time")

    def row(label: str, baseline: tuple[float, float], ours: tuple[float, float]) -> str:
        return (
            f"{label} {mb / ours[0]:7.1f} MB/s ({baseline[0] / ours[0]:.2f}x / {baseline[1] / ours[1]:.2f}x)"
        )

    print(f"  populate  tar xzf {mb / tar_x[0]:7.1f} MB/s | " + " | ".join(
        [row("ours", tar_x, our_x), row("HTTP multipart", tar_x, http_x), row("HTTP raw body", tar_x, http_raw)]
    ))  # fmt: skip
    print(f"  snapshot  tar czf {mb / tar_c[0]:7.1f} MB/s | " + " | ".join(
        [row("ours", tar_c, our_c), row("HTTP", tar_c, http_c)]
    ))  # fmt: skip
    print(
        f"  interleaved pairs (median of tar time / our time, same minute): populate {paired_x:.2f}x, "
        f"snapshot {paired_c:.2f}x"
    )
    ok = min(paired_x, paired_c) >= 0.8
    print(
        f"  target: populate and snapshot >= 0.8x tar (wall, interleaved pairs) -> {'met' if ok else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions per measurement (best is kept)")
    parser.add_argument("--size-mb", type=int, default=100, help="size of the populate/snapshot tree")
    parser.add_argument("--calls", type=int, default=800, help="timed tool calls per latency measurement")
    parser.add_argument("--pace-ms", type=float, default=50, help="paced sessions: one call every N ms each")
    parser.add_argument(
        "--only",
        choices=["start", "trial", "first", "latency", "cpu", "load", "transfer"],
        help="run one section (load: only the cpu section's lean-load-generator rows; trial: process"
        " start -> populate -> /apps, with --tree as before/now)",
    )
    parser.add_argument(
        "--load-calls", type=int, default=8000, help="timed calls per run of the lean load generator"
    )
    parser.add_argument(
        "--tree",
        type=Path,
        help="cpu and trial sections: also run this checkout's environment (A/B against older code)",
    )
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    servers, missing = available_servers()
    if not args.quiet:
        print(f"# Environment benchmark (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)", flush=True)
        if missing:
            print(f"  note: servers not available yet, left out: {', '.join(missing)}", flush=True)
    if args.only is None:
        # Each section in a fresh process: threads and caches left by one must not slow the next.
        for section in ("start", "trial", "first", "latency", "cpu", "transfer"):
            forwarded = ["--runs", str(args.runs), "--size-mb", str(args.size_mb), "--calls", str(args.calls),
                         "--pace-ms", str(args.pace_ms), "--load-calls", str(args.load_calls)]  # fmt: skip
            subprocess.run([sys.executable, __file__, "--only", section, "--quiet", *forwarded], check=True)
    elif args.only == "start":
        bench_cold_start(servers, args.runs)
    elif args.only == "trial":
        bench_trial_start(servers, args.runs, args.tree.resolve() if args.tree else None)
    elif args.only == "first":
        bench_first_calls(args.runs)
    elif args.only == "latency":
        bench_latency(args.calls, args.runs, args.pace_ms)
    elif args.only == "cpu":
        bench_cpu_per_call(args.calls, args.runs, args.tree.resolve() if args.tree else None, args.load_calls)
    elif args.only == "load":
        tree = args.tree.resolve() if args.tree else None
        bench_cpu_per_call(args.calls, args.runs, tree, args.load_calls, clients=False)
    elif args.only == "transfer":
        bench_transfer(args.size_mb, args.runs)
    if args.only is None or not args.quiet:
        print(f"\n(load average at end: {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
