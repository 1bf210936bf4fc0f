"""Opening, saving and recalculating workbooks for the spreadsheets server.

Saving (:func:`save_workbook`) is where the recalculation rule lives:

- a workbook without formulas is written as is;
- when the edit changed no cell value, sheet name/order or defined name (a formatting-only
  edit: widths, formats, merges cleared nothing, validations, conditional formats, filters,
  images, charts), the formulas' previous cached values are carried over and LibreOffice is
  not run, provided every formula had one;
- otherwise every formula is recomputed by LibreOffice (warm process) and the values are
  written into the file next to the formulas. When that fails (timeout, crash) the edit is
  still saved, the formulas keep no cached value, and reads show ``#NOT_COMPUTED: reason``.
"""

from __future__ import annotations

import io
import os
import threading
import time
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atoll._lazy import lazy_module
from atoll.errors import ErrorCode
from atoll.formats import bounds
from atoll.formats.libreoffice import ComputedSheets, LibreOffice, RecalcError, shared_engine
from atoll.formats.xlsx_values import cached_formula_values, computed_of, fill_cached_values
from mcp_servers._core import FileStamp, ServerContext, ToolError, WorldPath
from mcp_servers._office.package import bound_error
from mcp_servers.spreadsheets.values import DUMMY_FUNCTION, dummy_function_fallback

if TYPE_CHECKING:
    from openpyxl import Workbook
    from openpyxl.worksheet.worksheet import Worksheet

# openpyxl (and numpy, which it loads) is imported on the first call that opens a workbook
# with it, not when the server is built.
_openpyxl = lazy_module("openpyxl")

WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
DEFAULT_MAX_FILE_MB = 64
WORKBOOK_CACHE_SIZE = 8


@dataclass
class RecalcReport:
    """What happened to the formulas on a save (returned to agents as ``recalculation``)."""

    status: str  # "computed" | "carried_over" | "no_formulas" | "failed"
    formulas: int = 0
    seconds: float = 0.0
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "formulas": self.formulas,
            "seconds": round(self.seconds, 3),
        }
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass(frozen=True)
class WorkbookFile:
    """A workbook (or CSV) as read once through the root's descriptor: the libraries
    (openpyxl, the zip readers, LibreOffice) get these bytes, never a path to re-open.
    ``stamp`` comes from ``fstat`` of the descriptor the bytes were read from."""

    path: WorldPath
    virtual: str
    stamp: FileStamp
    data: bytes

    @property
    def key(self) -> str:
        return self.path.lock_key

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower()

    def stream(self) -> io.BytesIO:
        return io.BytesIO(self.data)


def read_world_file(
    path: WorldPath, virtual: str, *, limit: int, argument: str = "file_path"
) -> WorkbookFile:
    """Read ``path`` through the root's descriptor; ToolError ``too_large`` past ``limit``
    bytes, and the path's own errors (``not_found``, ``not_a_file``, ``path_outside_root``)."""
    with path.open() as handle:
        info = os.fstat(handle.fileno())
        if info.st_size > limit:
            raise ToolError(
                ErrorCode.too_large,
                f"{argument}: {virtual} is {info.st_size / 1048576:.1f} MB (limit {limit / 1048576:.0f} MB)",
                argument=argument,
            )
        return WorkbookFile(path, virtual, FileStamp.from_stat(info), handle.read())


@dataclass
class SheetsState:
    """Server state: the world context, the recalculation engine and a cache of values
    computed for reads of files whose formulas have no cached values."""

    ctx: ServerContext
    _engine: LibreOffice | None = None
    _computed: dict[str, tuple[FileStamp, ComputedSheets | str]] = field(default_factory=dict)
    _workbooks: OrderedDict[str, tuple[FileStamp, Workbook]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(cls, ctx: ServerContext) -> SheetsState:
        """The state of one server instance. With option ``prestart`` the warm LibreOffice
        starts now, in the background, so the first write does not wait ~3 s; off by default
        so processes that never compute a formula never start soffice."""
        state = cls(ctx=ctx)
        if state.recalc_mode in ("auto", "warm") and ctx.option("prestart", False):
            try:
                engine = state.engine()
            except ToolError:  # reported on first use, with the tool call that needs it
                engine = None
            if engine is not None:
                engine.start_in_background()
        return state

    @property
    def recalc_mode(self) -> str:
        """Option ``recalc``: auto (warm if possible), warm, cold, or off."""
        return self.ctx.option("recalc", "auto")

    @property
    def max_file_bytes(self) -> int:
        return int(self.ctx.option("max_file_mb", DEFAULT_MAX_FILE_MB) * 1024 * 1024)

    def engine(self) -> LibreOffice | None:
        if self.recalc_mode == "off":
            return None
        if self._engine is None:
            self._engine = shared_engine(
                soffice=self.ctx.option("soffice", "soffice"),
                timeout_s=self.ctx.option("recalc_timeout_s", 30.0),
                mode=self.recalc_mode,
            )
            if _inside(self._engine.scratch, self.ctx.fs_root):
                raise ToolError(
                    ErrorCode.internal, "the LibreOffice scratch folder lies inside the world; set TMPDIR"
                )
        return self._engine

    def take_workbook(self, file: WorkbookFile) -> Workbook | None:
        """The workbook we last saved to ``file`` if it is still exactly that version.

        The entry is removed: the caller edits the object and gives it back with
        :meth:`keep_workbook` only after a successful save, so a failed (partly applied)
        edit never leaks into the next one. Saves ~0.5 s of parsing per write.
        """
        with self._lock:
            entry = self._workbooks.pop(file.key, None)
        if entry is None or entry[0] != file.stamp:
            return None
        return entry[1]

    def keep_workbook(self, path: WorldPath, workbook: Workbook) -> None:
        # openpyxl cannot save a loaded image twice (its source stream is closed).
        if any(ws._images for ws in workbook.worksheets):
            return
        try:
            stamp = FileStamp.from_stat(path.stat())
        except ToolError:
            return
        with self._lock:
            self._workbooks[path.lock_key] = (stamp, workbook)
            while len(self._workbooks) > WORKBOOK_CACHE_SIZE:
                self._workbooks.popitem(last=False)

    def compute(self, file: WorkbookFile) -> ComputedSheets:
        """Values of ``file``'s formulas computed by LibreOffice on a private copy of its
        bytes (cached per file version). Raises RecalcError.
        """
        engine = self.engine()
        if engine is None:
            raise RecalcError("recalculation is turned off (option recalc=off)")
        key = file.key
        stamp = file.stamp
        with self._lock:
            cached = self._computed.get(key)
        if cached is not None and cached[0] == stamp:
            if isinstance(cached[1], str):
                raise RecalcError(cached[1])
            return cached[1]
        try:
            # LibreOffice loads the whole workbook: only what a library loading it whole may
            # (a read streams the sheet, so its own check counted no tags).
            bounds.check_package(file.data, file.virtual, tree=True)
            result: ComputedSheets | str = engine.compute(file.data)
        except (bounds.InputTooLarge, zipfile.BadZipFile) as exc:
            result = f"not recalculated: {exc}"
        except RecalcError as exc:
            result = str(exc)
        with self._lock:
            if len(self._computed) > 64:
                self._computed.clear()
            self._computed[key] = (stamp, result)
        if isinstance(result, str):
            raise RecalcError(result)
        return result


# -- opening --------------------------------------------------------------------------


def _inside(folder: Path, root: Path) -> bool:
    real, real_root = os.path.realpath(folder), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def check_workbook_path(
    state: SheetsState, path: WorldPath, virtual: str, *, argument: str = "file_path"
) -> WorkbookFile:
    """The workbook's bytes; refuses non-xlsx names, missing files, encrypted or oversized
    files (ToolError)."""
    if path.suffix.lower() not in WORKBOOK_SUFFIXES:
        raise ToolError(
            ErrorCode.unsupported,
            f"{argument}: {virtual} is not an .xlsx workbook (expected {', '.join(WORKBOOK_SUFFIXES)})",
            argument=argument,
        )
    file = read_world_file(path, virtual, limit=state.max_file_bytes, argument=argument)
    if file.data[:8] == _OLE_MAGIC:
        raise ToolError(
            ErrorCode.unsupported,
            f"{argument}: {virtual} is password-protected (encrypted) or a legacy .xls file; it cannot be opened",
            argument=argument,
        )
    return file


def open_workbook(
    file: WorkbookFile,
    virtual: str,
    *,
    argument: str = "file_path",
    data_only: bool = False,
    read_only: bool = False,
) -> Workbook:
    """Load a workbook, turning library failures into ToolError ``bad_data``; a full
    (not ``read_only``) load first passes :func:`atoll.formats.bounds.check_package`
    (``too_large`` for a bomb: openpyxl builds every cell in memory)."""
    try:
        bounds.check_package(file.data, virtual, tree=not read_only)
        return _openpyxl.load_workbook(
            file.stream(),
            data_only=data_only,
            read_only=read_only,
            keep_vba=file.suffix == ".xlsm",
            rich_text=False,
        )
    except zipfile.BadZipFile:
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a readable .xlsx workbook (not a zip archive)",
            argument=argument,
        ) from None
    except bounds.InputTooLarge as exc:
        raise bound_error(exc, argument) from None
    except Exception as exc:  # openpyxl raises many kinds on corrupt parts; messages may hold host paths
        raise ToolError(
            ErrorCode.bad_data,
            f"{argument}: {virtual} is not a readable .xlsx workbook ({type(exc).__name__})",
            argument=argument,
        ) from None


def sheet_position(names: list[str], sheet: str | int, *, argument: str = "sheet") -> int:
    """Index of a sheet given by 0-based index, exact name, case-insensitive name, or an
    index written as text ("2"). Raises ToolError ``not_found`` listing the sheets."""
    if isinstance(sheet, bool):
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: expected a sheet name or index", argument=argument
        )
    if isinstance(sheet, str):
        if sheet in names:
            return names.index(sheet)
        folded = [name.lower() for name in names]
        if folded.count(sheet.strip().lower()) == 1:
            return folded.index(sheet.strip().lower())
        if not sheet.strip().isdigit():
            listed = ", ".join(f"{i}={name}" for i, name in enumerate(names))
            raise ToolError(
                ErrorCode.not_found,
                f"{argument}: no sheet named {sheet!r} (sheets: {listed})",
                argument=argument,
            )
        sheet = int(sheet.strip())
    if 0 <= sheet < len(names):
        return sheet
    raise ToolError(
        ErrorCode.not_found,
        f"{argument}: index {sheet} is out of range (the workbook has {len(names)} sheets: 0-{len(names) - 1})",
        argument=argument,
    )


def sheet_of(workbook: Workbook, sheet: str | int, *, argument: str = "sheet") -> Worksheet:
    """A worksheet by 0-based index or name (see :func:`sheet_position`)."""
    return workbook.worksheets[
        sheet_position([ws.title for ws in workbook.worksheets], sheet, argument=argument)
    ]


def formula_cells(workbook: Workbook) -> Iterator[tuple[str, Any]]:
    """(sheet title, cell) for every formula cell."""
    for ws in workbook.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    yield ws.title, cell


# -- saving ---------------------------------------------------------------------------


def previous_values(file: WorkbookFile) -> dict[tuple[str, int, int], Any]:
    """Cached values of the formula cells of the file as it was read:
    {(sheet title, row, col): Computed}. Empty when the file cannot be read."""
    try:
        return cached_formula_values(file.stream())
    except Exception:  # an unreadable old file only means nothing to carry over
        return {}


def save_workbook(
    state: SheetsState,
    workbook: Workbook,
    target: WorldPath,
    *,
    values_changed: bool,
    source: WorkbookFile | None = None,
    overwrite: bool = True,
) -> RecalcReport:
    """Write ``workbook`` to ``target`` atomically with computed formula values (see the
    module docstring for when LibreOffice runs). ``source`` is the file the workbook was
    loaded from (its cached values may be carried over); None for a new workbook.

    LibreOffice works on a private copy in its scratch folder, outside the world; the
    result is written to a temp file in the target folder's descriptor and renamed over
    the name by descriptor (``overwrite=False``: ToolError ``already_exists`` if taken)."""

    def write(content: bytes) -> None:
        target.write_atomic(content, make_parents=True, overwrite=overwrite)

    buffer = io.BytesIO()
    workbook.save(buffer)
    data = buffer.getvalue()
    cells = list(formula_cells(workbook))
    if not cells:
        write(data)
        return RecalcReport("no_formulas")
    has_google = any(isinstance(c.value, str) and DUMMY_FUNCTION.lower() in c.value.lower() for _, c in cells)
    previous = previous_values(source) if source is not None and (has_google or not values_changed) else {}
    carried: ComputedSheets = {ws.title: {} for ws in workbook.worksheets}
    for title, cell in cells:
        old = previous.get((title, cell.row, cell.column))
        if old is not None:
            carried[title][(cell.row, cell.column)] = old
    if not values_changed and sum(len(sheet) for sheet in carried) == len(cells):
        write(fill_cached_values(data, carried))
        return RecalcReport("carried_over", formulas=len(cells))
    began = time.perf_counter()
    engine = state.engine()
    try:
        if engine is None:
            raise RecalcError("recalculation is turned off (option recalc=off)")
        computed = engine.compute(data)
    except RecalcError as exc:
        write(data)
        return RecalcReport(
            "failed", formulas=len(cells), seconds=time.perf_counter() - began, reason=str(exc)
        )
    _keep_google_fallbacks(cells, computed, carried)
    write(fill_cached_values(data, computed))
    return RecalcReport("computed", formulas=len(cells), seconds=time.perf_counter() - began)


def _keep_google_fallbacks(
    cells: list[tuple[str, Any]], computed: ComputedSheets, carried: ComputedSheets
) -> None:
    """Google Sheets export formulas cannot be computed outside Google: keep their previous
    value (or the IFERROR fallback) instead of LibreOffice's error."""
    for title, cell in cells:
        formula = cell.value if isinstance(cell.value, str) else ""
        if DUMMY_FUNCTION.lower() not in formula.lower():
            continue
        key = (cell.row, cell.column)
        sheet = computed.setdefault(title, {})
        now = sheet.get(key)
        if now is not None and now[0] != "e":
            continue
        if key in carried.get(title, {}):
            sheet[key] = carried[title][key]
        else:
            found, fallback = dummy_function_fallback(formula)
            if found:
                sheet[key] = computed_of(fallback)
