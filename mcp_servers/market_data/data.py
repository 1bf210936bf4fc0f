"""Reading the market-data fixtures of a world (``.apps_data/market_data/``).

Four datasets, each a ``NAME.csv`` or ``NAME.json`` (an array of objects with the same
fields); either file may be absent:

- ``quotes``: ``symbol, date, close`` and optionally ``open, high, low, volume, currency``;
- ``rates``: ``series, date, value`` and optionally ``unit, description``;
- ``profiles``: ``symbol, name`` and optionally ``exchange, sector, industry, currency,
  cik, shares_outstanding, market_cap, description``;
- ``filings``: ``symbol, form, filed`` and optionally ``filing_id, cik, company, period,
  title, url, text``, ``financials`` (an object, JSON only) or ``text_file`` (a text file
  beside the fixtures holding the filing's text).

Dates are ISO ``YYYY-MM-DD``.  A malformed row is a ``bad_data`` error naming the file and
row.  Files are re-read only when they change; symlinks are not followed.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import stat
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from atoll.errors import ErrorCode
from mcp_servers._core import FileCache, ServerContext, ToolError

DATASETS = ("quotes", "rates", "profiles", "filings")
_REQUIRED = {
    "quotes": ("symbol", "date", "close"),
    "rates": ("series", "date", "value"),
    "profiles": ("symbol", "name"),
    "filings": ("symbol", "form", "filed"),
}
_NUMBERS = {
    "quotes": ("open", "high", "low", "close", "volume"),
    "rates": ("value",),
    "profiles": ("shares_outstanding", "market_cap"),
    "filings": (),
}
_DATES = {"quotes": ("date",), "rates": ("date",), "profiles": (), "filings": ("filed", "period")}
MAX_FIXTURE_BYTES = 64 * 1024 * 1024


def _read_plain(path: Path) -> bytes:
    """The bytes of a regular file, refusing symlinks (the fixture folder is world data)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ToolError(
            ErrorCode.bad_data, f"market data file {path.name}: cannot be read ({exc.strerror})"
        ) from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FIXTURE_BYTES:
            raise ToolError(
                ErrorCode.bad_data, f"market data file {path.name}: not a regular file under 64 MB"
            )
        return handle.read()


def _number(value: Any, where: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return float(str(value).replace(",", "")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ToolError(ErrorCode.bad_data, f"{where}: {value!r} is not a number") from None


def _iso(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        return date.fromisoformat(str(value).strip()[:10]).isoformat()
    except ValueError:
        raise ToolError(ErrorCode.bad_data, f"{where}: {value!r} is not a YYYY-MM-DD date") from None


def _records(name: str, path: Path) -> list[dict[str, Any]]:
    raw = _read_plain(path)
    if path.suffix == ".json":
        try:
            rows = json.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ToolError(
                ErrorCode.bad_data, f"market data file {path.name}: not valid JSON ({exc})"
            ) from None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise ToolError(
                ErrorCode.bad_data, f"market data file {path.name}: expected a JSON array of objects"
            )
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ToolError(ErrorCode.bad_data, f"market data file {path.name}: not UTF-8 text") from None
        rows = [{k.strip(): v for k, v in row.items() if k} for row in csv.DictReader(io.StringIO(text))]
    parsed = []
    for number, row in enumerate(rows, start=1):
        where = f"market data file {path.name} row {number}"
        missing = [field for field in _REQUIRED[name] if row.get(field) in (None, "")]
        if missing:
            raise ToolError(ErrorCode.bad_data, f"{where}: missing {', '.join(missing)}")
        record = dict(row)
        for field in _NUMBERS[name]:
            if field in record:
                record[field] = _number(record[field], f"{where} {field}")
        for field in _DATES[name]:
            if field in record:
                record[field] = _iso(record[field], f"{where} {field}")
        for field in ("symbol",):
            if field in record:
                record[field] = str(record[field]).strip().upper()
        parsed.append(record)
    return parsed


@dataclass
class MarketData:
    """The fixtures of one world; each dataset parsed once per file version."""

    context: ServerContext

    def __post_init__(self) -> None:
        self._caches = {name: FileCache(functools.partial(_records, name)) for name in DATASETS}

    @property
    def folder(self) -> Path:
        return self.context.app_dir("market_data")

    def _file(self, name: str) -> Path | None:
        folder = self.folder
        if folder.is_symlink() or not folder.is_dir():
            return None
        for suffix in (".json", ".csv"):
            path = folder / f"{name}{suffix}"
            if path.exists() or path.is_symlink():
                return path
        return None

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Every record of dataset ``name`` (empty when the world has none)."""
        path = self._file(name)
        if path is None:
            return []
        return self._caches[name].get(path)

    def filing_text(self, filing: dict[str, Any]) -> str:
        """The filing's text: its ``text`` field, or the file ``text_file`` names."""
        if filing.get("text"):
            return str(filing["text"])
        name = filing.get("text_file")
        if not name:
            return ""
        if "/" in str(name) or "\\" in str(name) or str(name).startswith("."):
            raise ToolError(
                ErrorCode.bad_data,
                f"filing {filing.get('filing_id')}: text_file {name!r} must be a plain file name",
            )
        return _read_plain(self.folder / str(name)).decode("utf-8", "replace")

    def available(self) -> bool:
        return any(self._file(name) for name in DATASETS)
