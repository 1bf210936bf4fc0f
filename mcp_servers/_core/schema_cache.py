"""Our tools' JSON schemas kept between processes, so that a start does not recompute them.

Building the nine app servers computes some 150 JSON schemas of their argument and result
models with pydantic (``model_json_schema``): about 0.13 s of a start's CPU on the development
machine, nearly half of building the servers. The schemas depend only on our source code and on
pydantic, so a process that has computed them writes them to one JSON file, and a later process
running the same code reads them instead (docs/performance.md, "Start-up").

- **Keyed by what the schemas depend on**: the file's name holds a SHA-256 of the Python and
  pydantic versions and of every ``.py`` file of the ``mcp_servers`` and ``atoll`` packages
  (≈ 10 ms to hash); any change to either gives another file, so a stale schema is never read.
  Only tools whose function lives in ``mcp_servers`` are cached (a test's or a plug-in's tool
  is always computed).
- **Where**: ``ATOLL_SCHEMA_CACHE`` (a directory; ``off`` disables the cache), else
  ``tool-schemas`` in atoll's cache folder (:mod:`atoll.cache_paths`: ``~/.cache/atoll`` by
  default). The environment image
  fills it at build time and reads it read-only.
- **Never in the way**: an unreadable, unwritable or corrupt file only means the schemas are
  computed (a corrupt file is replaced on the next save); files are written whole and renamed
  into place, so a concurrent reader sees the old file or the new one.
- Each schema read from the file is a fresh object, so a caller that changes it changes
  nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pydantic
import pydantic_core

from atoll.cache_paths import cache_root
from atoll.settings import variable

logger = logging.getLogger("mcp_servers")

#: the value of ATOLL_SCHEMA_CACHE that turns the cache off
OFF = "off"

_lock = threading.Lock()
_file: Path | None = None  # the cache file for this code, once known
_entries: dict[str, bytes] | None = None  # key -> schema as JSON, once read
_unsaved = False  # computed entries not yet written
#: schemas read from the cache file and computed in this process (tests and benchmarks read it)
counts = {"read": 0, "computed": 0}


def cache_dir() -> Path | None:
    """The directory of the cache files, or None when the cache is off."""
    configured = variable("ATOLL_SCHEMA_CACHE")
    if configured is not None:
        return None if configured.strip().lower() in (OFF, "") else Path(configured)
    return cache_root() / "tool-schemas"


def source_key(roots: list[Path] | None = None) -> str:
    """A SHA-256 of what our tools' schemas depend on: the Python and pydantic versions and the
    source of the ``mcp_servers`` and ``atoll`` packages (``roots``: other package folders)."""
    if roots is None:
        import atoll
        import mcp_servers

        roots = [Path(package.__path__[0]) for package in (mcp_servers, atoll)]
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\0{pydantic.VERSION}\0{pydantic_core.__version__}\0".encode())
    for root in roots:
        digest.update(b"\0\0" + root.name.encode())
        for path in sorted(root.rglob("*.py")):
            digest.update(b"\0" + path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _load() -> dict[str, bytes]:
    """The entries of this code's cache file (read once per process)."""
    global _entries, _file
    if _entries is None:
        _entries = {}
        directory = cache_dir()
        if directory is not None:
            _file = directory / f"{source_key()}.json"
            try:
                stored = orjson.loads(_file.read_bytes())
            except FileNotFoundError:
                stored = {}
            except (OSError, ValueError) as exc:
                logger.info("tool schema cache unreadable", extra={"path": str(_file), "error": str(exc)})
                stored = {}
            if isinstance(stored, dict):
                _entries = {
                    key: orjson.dumps(value) for key, value in stored.items() if isinstance(value, dict)
                }
    return _entries


def cached_schema(
    owner: Callable[..., Any], name: str, kind: str, compute: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The ``kind`` schema of the tool ``name`` whose function is ``owner``: read from the cache
    file when it holds it, else ``compute()``d (and kept for :func:`save`)."""
    global _unsaved
    module = getattr(owner, "__module__", "") or ""
    if not module.startswith("mcp_servers.") or cache_dir() is None:
        counts["computed"] += 1
        return compute()
    key = f"{module}:{owner.__qualname__}:{name}#{kind}"
    with _lock:
        entries = _load()
        stored = entries.get(key)
    if stored is not None:
        counts["read"] += 1
        return orjson.loads(stored)
    counts["computed"] += 1
    schema = compute()
    try:
        encoded = orjson.dumps(schema)
    except TypeError:  # not plain JSON: computed every time
        return schema
    with _lock:
        entries[key] = encoded
        _unsaved = True
    return schema


def save() -> Path | None:
    """Write the schemas computed in this process to the cache file (when any are new); returns
    the file written, or None."""
    global _unsaved
    with _lock:
        if not _unsaved or _file is None or _entries is None:
            return None
        body = (
            b"{"
            + b",".join(orjson.dumps(key) + b":" + value for key, value in sorted(_entries.items()))
            + b"}"
        )
        written: str | None = None
        try:
            _file.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=_file.parent, prefix=".tool-schemas-", delete=False) as out:
                written = out.name
                out.write(body)
            os.chmod(written, 0o644)  # readable by the service user of an image built as root
            os.replace(written, _file)
        except OSError as exc:
            if written is not None:
                with contextlib.suppress(OSError):
                    os.unlink(written)
            logger.info("tool schema cache not written", extra={"path": str(_file), "error": str(exc)})
            return None
        _unsaved = False
        return _file


def reset() -> None:
    """Forget what this process read or computed (tests; a changed ATOLL_SCHEMA_CACHE)."""
    global _entries, _file, _unsaved
    with _lock:
        _entries, _file, _unsaved = None, None, False
        counts.update(read=0, computed=0)
