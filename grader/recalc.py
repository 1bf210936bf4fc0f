"""Compute formula values that a workbook does not carry, with headless LibreOffice.

Workbooks written by openpyxl (an agent's ``code_exec`` script, a gold file) store formulas
without cached values, so ``data_only`` reads give None.  Such a workbook is converted
xlsx -> xlsx by LibreOffice, which computes every formula; results are memoised by content
hash.  Each conversion uses its own profile folder, so conversions may run in parallel.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

_memo: OrderedDict[str, bytes | None] = OrderedDict()
_MEMO_SIZE = 32  # a long-running service must not keep every workbook it ever saw
_lock = threading.Lock()
_in_flight: dict[str, threading.Lock] = {}
TIMEOUT_S = 90.0


def recalculated(data: bytes, suffix: str = ".xlsx") -> bytes | None:
    """The workbook with every formula computed by LibreOffice, or None when that failed
    (LibreOffice missing, timeout, unreadable file)."""
    key = hashlib.sha256(data).hexdigest()
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
        in_flight = _in_flight.setdefault(key, threading.Lock())
    with in_flight:  # concurrent checks on one workbook share one LibreOffice run
        with _lock:
            if key in _memo:
                return _memo[key]
        result = _convert(data, suffix)
        with _lock:
            _memo[key] = result
            _in_flight.pop(key, None)
            while len(_memo) > _MEMO_SIZE:
                _memo.popitem(last=False)
    return result


def _convert(data: bytes, suffix: str) -> bytes | None:
    office = shutil.which("soffice") or shutil.which("libreoffice")
    if office is None:
        return None
    with tempfile.TemporaryDirectory(prefix="atoll-recalc-") as scratch:
        folder = Path(scratch)
        source = folder / f"workbook{suffix}"
        source.write_bytes(data)
        command = [
            office,
            "--headless",
            "--norestore",
            "--nologo",
            f"-env:UserInstallation={(folder / 'profile').as_uri()}",
            "--convert-to",
            suffix.lstrip("."),
            "--outdir",
            str(folder / "out"),
            str(source),
        ]
        try:
            subprocess.run(command, capture_output=True, timeout=TIMEOUT_S, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        target = folder / "out" / source.name
        return target.read_bytes() if target.is_file() else None


def with_values(data: bytes) -> bytes:
    """``data`` itself, or its recalculated form when it has formulas without values."""
    from atoll.formats.xlsx import has_uncached_formulas

    try:
        if not has_uncached_formulas(data):
            return data
    except Exception:  # noqa: BLE001 - unreadable workbooks are reported by their reader
        return data
    return recalculated(data) or data
