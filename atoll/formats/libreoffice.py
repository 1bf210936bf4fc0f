"""Formula recalculation with headless LibreOffice, warm when possible.

Two ways to compute the values of a workbook's formulas:

- **warm** (default when a Python with LibreOffice's ``uno`` module exists, e.g. Debian
  ``python3-uno``): one long-lived ``soffice --headless --accept=pipe,…`` per process and a
  small worker (:mod:`atoll.formats._uno_worker`, run by that Python) that
  loads the workbook over UNO, recalculates everything and returns the computed value of
  every formula cell. A write then costs ~0.1–0.3 s of LibreOffice instead of a ~4 s cold
  start.
- **cold** (fallback, and the benchmark's baseline): ``soffice --convert-to xlsx`` with a
  fresh process per call; the converted copy's cached values are read with openpyxl.

Both run with a private profile whose ``OOXMLRecalcMode``/``ODFRecalcMode`` are 0
("always recalculate on load"), because LibreOffice otherwise trusts stale cached values
in xlsx files. Every scratch file (profile, workbook copies, converted output) lives in a
private folder in the system temp directory, never inside a world. A call that runs past
``timeout_s`` kills the soffice process group (the next call starts a fresh one) and
raises :class:`RecalcError`.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from atoll.content_cache import ContentCache
from atoll.errors import CodedError, ErrorCode
from atoll.settings import child_environment

#: (kind, value) with kind "n" number, "s" text, "b" boolean, "e" error text.
Computed = tuple[str, Any]
#: Per sheet name: {(row, col): Computed} for formula cells (1-based). By name, not position,
#: because chart sheets count as sheets in some readers and not in others.
ComputedSheets = dict[str, dict[tuple[int, int], Computed]]

_PROFILE_XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse">\
<value>false</value></prop></item>
</oor:items>
"""
_NETWORK_FUNCTIONS = re.compile(rb"<f[^>]*>[^<]*\bWEBSERVICE\s*\(", re.IGNORECASE)
#: Functions whose value changes between computations (anywhere in a sheet: a false match
#: only means a workbook is computed again rather than taken from the cache).
_VOLATILE_FUNCTIONS = re.compile(rb"\b(NOW|TODAY|RAND|RANDBETWEEN|RANDARRAY)\s*\(", re.IGNORECASE)
#: Workbooks' computed values kept per engine, by the sha256 of their bytes.
_COMPUTED_PER_ENGINE = 64
RECYCLE_AFTER_JOBS = 500
_UNO_PATHS = ("/usr/lib/python3/dist-packages", "/usr/lib/libreoffice/program")
_WORKER = Path(__file__).with_name("_uno_worker.py")


class RecalcError(CodedError):
    """Formulas could not be computed; ``str()`` is the reason shown to agents."""

    code = ErrorCode.recalc_failed


def find_uno_python() -> tuple[str, dict[str, str]] | None:
    """A Python interpreter that can ``import uno`` and the environment it needs, or None."""
    candidates: list[tuple[str, dict[str, str]]] = []
    for python in ("/usr/bin/python3", "/usr/lib/libreoffice/program/python"):
        if os.path.exists(python):
            candidates.append((python, {}))
    extra = os.pathsep.join(p for p in _UNO_PATHS if os.path.isdir(p))
    if extra:
        candidates.append((sys.executable, {"PYTHONPATH": extra}))
    for python, env in candidates:
        try:
            probe = subprocess.run(
                [python, "-c", "import uno"],
                env=child_environment(**env),
                capture_output=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return python, env
    return None


def refuse_network_functions(workbook: Any) -> bool:
    """Raise RecalcError when a formula calls a function that fetches from the network.

    LibreOffice evaluates ``WEBSERVICE`` (and ``FILTERXML`` over it) during recalculation;
    agents must not reach the network, so such workbooks are not computed at all. Returns
    whether a formula may call a volatile function (``NOW``, ``TODAY``, ``RAND``…), whose
    values differ from one computation to the next.
    """
    volatile = False
    try:
        with zipfile.ZipFile(workbook) as archive:
            for name in archive.namelist():
                if name.startswith("xl/worksheets/") and name.endswith(".xml"):
                    xml = archive.read(name)
                    if _NETWORK_FUNCTIONS.search(xml):
                        raise RecalcError(
                            "a formula calls WEBSERVICE, which is not computed (no network access)"
                        )
                    volatile = volatile or _VOLATILE_FUNCTIONS.search(xml) is not None
    except zipfile.BadZipFile:
        raise RecalcError("the workbook is not a valid xlsx (zip) file") from None
    return volatile


def write_profile(folder: Path) -> str:
    """Create a LibreOffice user profile that recalculates on load; returns its file URL."""
    user = folder / "user"
    user.mkdir(parents=True, exist_ok=True)
    (user / "registrymodifications.xcu").write_text(_PROFILE_XCU, encoding="utf-8")
    return folder.resolve().as_uri()


def _office_command(soffice: str, profile: str, *arguments: str) -> list[str]:
    """``soffice`` headless, without a window, splash, restore or lock check, on the user
    profile ``profile`` (:func:`write_profile`), with ``arguments`` after."""
    return [
        soffice,
        f"-env:UserInstallation={profile}",
        "--headless",
        "--invisible",
        "--nologo",
        "--norestore",
        "--nolockcheck",
        *arguments,
    ]


def _kill_group(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


@dataclass
class RecalcStats:
    """Counters read by tests and benchmarks."""

    starts: int = 0
    calls: int = 0  # workbooks computed by LibreOffice
    cached: int = 0  # workbooks whose bytes were computed before: answered from the engine's cache
    timeouts: int = 0


class LibreOffice:
    """Computes formula values of xlsx files; thread-safe (calls are serialised).

    ``mode`` is "warm", "cold" or "auto" (warm when a uno-capable Python exists).
    """

    def __init__(
        self,
        *,
        soffice: str = "soffice",
        timeout_s: float = 30.0,
        mode: str = "auto",
        scratch_parent: str | None = None,
    ) -> None:
        if mode not in ("auto", "warm", "cold"):
            raise ValueError(f"mode must be auto, warm or cold, got {mode!r}")
        self.soffice = soffice
        self.timeout_s = timeout_s
        self.scratch = Path(tempfile.mkdtemp(prefix="atoll-libreoffice-", dir=scratch_parent))
        self.stats = RecalcStats()
        self._requested_mode = mode
        self._uno: tuple[str, dict[str, str]] | None | Literal[False] = False  # False = not probed yet
        self._lock = threading.Lock()
        self._office: subprocess.Popen | None = None
        self._worker: subprocess.Popen | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._next_id = 0
        self._jobs = 0
        self._closed = False
        #: computed values by workbook content: every trial's world is a fresh copy of the
        #: same files, so the agent's reads of a seed workbook compute the same bytes again
        self._computed: ContentCache[ComputedSheets] = ContentCache(max_entries=_COMPUTED_PER_ENGINE)

    # -- public -----------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """The mode in use ("warm" or "cold"), probing for uno on first use."""
        if self._requested_mode != "auto":
            return self._requested_mode
        if self._uno is False:
            self._uno = find_uno_python()
        return "warm" if self._uno else "cold"

    def available(self) -> bool:
        """Whether the soffice binary exists at all."""
        return shutil.which(self.soffice) is not None

    def compute(self, workbook: bytes, *, timeout_s: float | None = None) -> ComputedSheets:
        """The computed values of every formula cell of ``workbook`` (the bytes of an xlsx).

        The bytes are written to a private copy in the scratch folder (outside the world:
        LibreOffice only ever opens paths there). ``timeout_s`` overrides the engine's limit
        for this call (the grader waits longer than a tool call on the same warm soffice).
        Raises RecalcError (not installed, timeout, crash, unreadable workbook).
        """
        if not self.available():
            raise RecalcError(f"LibreOffice ({self.soffice}) is not installed")
        volatile = refuse_network_functions(io.BytesIO(workbook))
        with self._lock:
            if self._closed:
                raise RecalcError("the recalculation engine was shut down")
            if volatile:  # NOW(), RAND(): computed anew every time
                return self._compute_locked(workbook, timeout_s)
            calls = self.stats.calls
            known = self._computed.get(workbook, None, lambda: self._compute_locked(workbook, timeout_s))
            if self.stats.calls == calls:
                self.stats.cached += 1
            return {sheet: dict(cells) for sheet, cells in known.items()}  # the caller's own

    def _compute_locked(self, workbook: bytes, timeout_s: float | None) -> ComputedSheets:
        """One recalculation (the engine's lock held)."""
        self.stats.calls += 1
        job = self.scratch / f"job-{uuid.uuid4().hex}"
        job.mkdir()
        try:
            copy = job / "workbook.xlsx"
            copy.write_bytes(workbook)
            limit = self.timeout_s if timeout_s is None else timeout_s
            if self.mode == "warm":
                return self._compute_warm(copy, limit)
            return self._compute_cold(copy, job, limit)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def start(self) -> None:
        """Start the warm soffice and worker now (otherwise the first compute does)."""
        with self._lock:
            if self.mode == "warm" and not self._closed:
                self._ensure_warm()

    def start_in_background(self) -> None:
        """Start the warm soffice in a daemon thread (failures surface on first use)."""

        def run() -> None:
            with contextlib.suppress(RecalcError, OSError):
                self.start()

        if self.available():
            threading.Thread(target=run, name="libreoffice-start", daemon=True).start()

    def close(self) -> None:
        """Stop soffice and the worker and delete the scratch folder."""
        with self._lock:
            self._closed = True
            self._stop_warm()
            shutil.rmtree(self.scratch, ignore_errors=True)

    # -- warm -------------------------------------------------------------------------

    def _ensure_warm(self) -> None:
        alive = (
            self._worker is not None
            and self._office is not None
            and self._worker.poll() is None
            and self._office.poll() is None
        )
        if alive and self._jobs < RECYCLE_AFTER_JOBS:
            return
        self._stop_warm()  # dead, or recycled to bound LibreOffice's memory growth
        self._jobs = 0
        if self._uno is False:
            self._uno = find_uno_python()
        if not self._uno:
            raise RecalcError("no Python with LibreOffice's uno module found (install python3-uno)")
        python, env = self._uno
        pipe = f"atoll-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        profile = write_profile(self.scratch / "profile-warm")
        self.stats.starts += 1
        self._office = subprocess.Popen(
            _office_command(
                self.soffice,
                profile,
                "--nodefault",
                f"--accept=pipe,name={pipe};urp;StarOffice.ComponentContext",
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.scratch,
            start_new_session=True,
        )
        self._worker = subprocess.Popen(
            [python, str(_WORKER), "--pipe", pipe, "--connect-timeout", str(max(self.timeout_s, 30.0))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_environment(**env),
            cwd=self.scratch,
            start_new_session=True,
        )
        self._replies = queue.Queue()
        threading.Thread(target=self._pump, args=(self._worker, self._replies), daemon=True).start()
        ready = self._read_reply(max(self.timeout_s, 30.0) + 5, "start")
        if not ready.get("ready"):
            self._stop_warm()
            raise RecalcError("LibreOffice did not start")

    @staticmethod
    def _pump(worker: subprocess.Popen, replies: queue.Queue[str | None]) -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            replies.put(line)
        replies.put(None)

    def _read_reply(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=timeout_s)
        except queue.Empty:
            self.stats.timeouts += 1
            self._stop_warm()
            raise RecalcError(
                f"LibreOffice timed out after {timeout_s:g} s ({what}); it was restarted"
            ) from None
        if line is None:
            self._stop_warm()
            raise RecalcError(f"LibreOffice stopped unexpectedly ({what}); it will be restarted")
        return json.loads(line)

    def _compute_warm(self, copy: Path, timeout_s: float) -> ComputedSheets:
        self._ensure_warm()
        assert self._worker is not None and self._worker.stdin is not None
        self._next_id += 1
        self._jobs += 1
        request_id = self._next_id
        try:
            self._worker.stdin.write(json.dumps({"id": request_id, "path": str(copy)}) + "\n")
            self._worker.stdin.flush()
        except OSError:
            self._stop_warm()
            raise RecalcError("LibreOffice stopped unexpectedly; it will be restarted") from None
        reply = self._read_reply(timeout_s, "recalculation")
        if reply.get("id") != request_id:  # a late answer to an abandoned request: start over
            self._stop_warm()
            raise RecalcError("LibreOffice answered out of order; it was restarted")
        if "error" in reply:
            raise RecalcError(f"LibreOffice could not compute the workbook: {reply['error']}")
        return {
            name: {(r, c): (kind, value) for r, c, kind, value in cells} for name, cells in reply["sheets"]
        }

    def _stop_warm(self) -> None:
        worker, office = self._worker, self._office
        self._worker = self._office = None
        if worker is not None and worker.stdin is not None:
            with contextlib.suppress(OSError):
                worker.stdin.close()
        _kill_group(worker)
        _kill_group(office)

    # -- cold -------------------------------------------------------------------------

    def _compute_cold(self, copy: Path, job: Path, timeout_s: float) -> ComputedSheets:
        profile = write_profile(job / "profile")
        out = job / "out"
        out.mkdir()
        self.stats.starts += 1
        process = subprocess.Popen(
            _office_command(
                self.soffice,
                profile,
                "--convert-to",
                "xlsx:Calc MS Excel 2007 XML",
                "--outdir",
                str(out),
                str(copy),
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=job,
            start_new_session=True,
        )
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stats.timeouts += 1
            _kill_group(process)
            raise RecalcError(f"LibreOffice timed out after {timeout_s:g} s") from None
        converted = out / copy.name
        if process.returncode != 0 or not converted.exists():
            raise RecalcError(f"LibreOffice could not convert the workbook (exit {process.returncode})")
        return _read_computed(converted, formulas_of=copy)


def _read_computed(converted: Path, *, formulas_of: Path) -> ComputedSheets:
    """Cached values (from LibreOffice's output) of the cells that hold formulas in the input."""
    from openpyxl import load_workbook

    source = load_workbook(formulas_of, read_only=True)
    result = load_workbook(converted, read_only=True, data_only=True)
    try:
        sheets: ComputedSheets = {}
        outputs = {ws.title: ws for ws in result.worksheets}
        for ws_in in source.worksheets:
            ws_out = outputs.get(ws_in.title)
            if ws_out is None:
                continue
            wanted = {
                (cell.row, cell.column)
                for row in ws_in.iter_rows()
                for cell in row
                if getattr(cell, "data_type", None) == "f"
            }
            values: dict[tuple[int, int], Computed] = {}
            for row in ws_out.iter_rows():
                for cell in row:
                    key = (getattr(cell, "row", None), getattr(cell, "column", None))
                    if key in wanted:
                        values[key] = _kind_of(cell.value, getattr(cell, "data_type", "n"))
            sheets[ws_in.title] = values
        return sheets
    finally:
        source.close()
        result.close()


def _kind_of(value: Any, data_type: str) -> Computed:
    if data_type == "e":
        return ("e", str(value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", float(value))
    if value is None:
        return ("s", "")
    return ("s", str(value))


_shared: dict[tuple[str, float, str], LibreOffice] = {}
_shared_lock = threading.Lock()


def shared_engine(*, soffice: str = "soffice", timeout_s: float = 30.0, mode: str = "auto") -> LibreOffice:
    """The process-wide engine for these settings (one warm soffice serves every server)."""
    key = (soffice, float(timeout_s), mode)
    with _shared_lock:
        engine = _shared.get(key)
        if engine is None or engine._closed:
            engine = _shared[key] = LibreOffice(soffice=soffice, timeout_s=timeout_s, mode=mode)
        return engine


@atexit.register
def _close_shared() -> None:
    for engine in list(_shared.values()):
        engine.close()


# What the grader computes, by content hash: extraction and checks read one workbook several
# times; a long-running service must not keep every workbook it ever saw.
# Concurrent calls on one workbook share one recalculation.
_computed: ContentCache[bytes] = ContentCache(max_entries=32)
#: The grader's limit per recalculation: a judge can wait longer than an agent's tool call.
GRADER_TIMEOUT_S = 90.0


def with_computed_values(data: bytes, *, engine: LibreOffice | None = None, name: str = "workbook") -> bytes:
    """The workbook ``data`` with a computed value in every formula cell that has none.

    ``data`` itself when every formula carries a cached value, when it is not a readable
    workbook (its reader reports that), when it holds more XML than a library loading it
    whole may (:func:`atoll.formats.bounds.check_package`) or when LibreOffice cannot compute
    it (not installed, timeout, a WEBSERVICE formula); raises
    :class:`~atoll.formats.bounds.InputTooLarge` past a reading bound; otherwise the same bytes with those cells' values filled
    in (:func:`atoll.formats.xlsx_values.fill_cached_values`), exactly what the spreadsheet
    tools show for them. ``engine`` defaults to the process-wide warm one
    (:func:`shared_engine`). Concurrent calls on one workbook share one recalculation.
    ``name`` names the file in errors.
    """
    from atoll.formats import bounds
    from atoll.formats.xlsx import has_uncached_formulas

    try:
        # The rows the grader extracts; a workbook past a reading bound raises InputTooLarge
        # here, as its reader would next.
        if not has_uncached_formulas(data, name, stop_row=bounds.LIMITS.max_extracted_rows):
            return data
    except bounds.InputTooLarge:
        raise
    except Exception:  # noqa: BLE001 - unreadable workbooks are reported by their reader
        return data
    try:  # LibreOffice loads the whole workbook: only what a library loading whole may
        bounds.check_package(data, name, tree=True)
    except (bounds.InputTooLarge, zipfile.BadZipFile):
        return data
    # The default engine is the one the spreadsheet tools use (one warm soffice per process,
    # also when the grader runs embedded beside the environment).
    return _computed.get(data, None, lambda: _fill_computed(data, engine or shared_engine()))


def _fill_computed(data: bytes, engine: LibreOffice) -> bytes:
    from atoll.formats.xlsx_values import fill_cached_values

    try:
        return fill_cached_values(data, engine.compute(data, timeout_s=GRADER_TIMEOUT_S))
    except (RecalcError, OSError, ValueError, KeyError, zipfile.BadZipFile):
        return data
